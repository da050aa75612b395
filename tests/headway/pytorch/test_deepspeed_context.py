"""``headway.pytorch.deepspeed``: config merging, batch sizes, MPU, refusals, set-up, harness."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
import torch
import yaml

pytest.importorskip("deepspeed")

import deepspeed

from headway.exec import harness
from headway.expconf import ConfigError, sample_hparams
from headway.pytorch import deepspeed as hw_ds
from headway.pytorch.deepspeed import _setup
from tests.helpers import REPO

ADAM = {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True, "adam_w_mode": False}}


def engine(micro: int = 4, accumulation: int = 2) -> deepspeed.DeepSpeedEngine:
    model = torch.nn.Linear(3, 2)
    config = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accumulation,
        "optimizer": ADAM,
        "steps_per_print": 1000000,
    }
    built, _, _, _ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=config
    )
    return built


# -- overwrite_deepspeed_config --------------------------------------------------------------------


def test_overwrite_merges_nested_fields_and_leaves_its_arguments_alone(tmp_path) -> None:
    base = {
        "train_batch_size": 8,
        "optimizer": {"type": "Adam", "params": {"lr": 0.1, "eps": 1e-8}},
    }
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(base))
    source = {"optimizer": {"params": {"lr": 0.01}}, "zero_optimization": {"stage": 1}}
    for given in (base, str(path), path):
        merged = hw_ds.overwrite_deepspeed_config(given, source)
        assert merged == {
            "train_batch_size": 8,
            "optimizer": {"type": "Adam", "params": {"lr": 0.01, "eps": 1e-8}},
            "zero_optimization": {"stage": 1},
        }
    assert base["optimizer"]["params"]["lr"] == 0.1
    # A leaf replaced by a dict, a dict replaced by a leaf: the source wins.
    assert hw_ds.overwrite_deepspeed_config({"a": 1, "b": {"c": 2}}, {"a": {"x": 1}, "b": 3}) == {
        "a": {"x": 1},
        "b": 3,
    }


def test_overwrite_errors_name_what_is_wrong(tmp_path) -> None:
    with pytest.raises(TypeError, match="base_ds_config"):
        hw_ds.overwrite_deepspeed_config(["x"], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source_ds_dict"):
        hw_ds.overwrite_deepspeed_config({}, [("lr", 1)])  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        hw_ds.overwrite_deepspeed_config(str(tmp_path / "missing.json"), {})
    duplicated = tmp_path / "dup.json"
    duplicated.write_text('{"train_batch_size": 8, "train_batch_size": 16}')
    with pytest.raises(ValueError, match="duplicate key 'train_batch_size'"):
        hw_ds.overwrite_deepspeed_config(str(duplicated), {})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match="invalid JSON"):
        hw_ds.overwrite_deepspeed_config(str(broken), {})


# -- the context ----------------------------------------------------------------------------------


def test_batch_sizes_come_from_the_first_engine(tmp_path) -> None:
    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        with pytest.raises(RuntimeError, match="wrap_model_engine"):
            context.get_train_micro_batch_size_per_gpu()
        with pytest.raises(RuntimeError, match="wrap_model_engine"):
            context.get_num_micro_batches_per_slot()
        with pytest.raises(ValueError, match="global_batch_size"):
            context.get_global_batch_size()
        first = context.wrap_model_engine(engine(micro=4, accumulation=3))
        assert context.models == [first]
        assert context.get_train_micro_batch_size_per_gpu() == 4
        assert context.get_num_micro_batches_per_slot() == 3
        assert context.get_global_batch_size() == 12 == context.get_per_slot_batch_size()
        assert not context.use_pipeline_parallel
        with pytest.warns(FutureWarning):
            assert context.train_micro_batch_size_per_gpu == 4
        with pytest.warns(FutureWarning):
            assert context.num_micro_batches_per_slot == 3
        # A second engine with another micro-batch size is allowed; the first one decides.
        context.wrap_model_engine(engine(micro=2, accumulation=3))
        assert context.get_train_micro_batch_size_per_gpu() == 4 and len(context.models) == 2
        with pytest.raises(ValueError, match="already wrapped"):
            context.wrap_model_engine(first)
        with pytest.raises(TypeError, match=r"deepspeed\.DeepSpeedEngine"):
            context.wrap_model_engine((first, None, None, None))


def test_global_batch_size_hparam_must_match_the_engine(tmp_path) -> None:
    with hw_ds.init(hparams={"global_batch_size": 16}, checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.get_global_batch_size() == 16  # known before any engine
        with pytest.raises(
            ValueError, match=r"hyperparameters.global_batch_size \(16\).*train_batch_size \(8"
        ):
            ctx.wrap_model_engine(engine(micro=4, accumulation=2))
        ctx.wrap_model_engine(engine(micro=8, accumulation=2))
        assert ctx.get_global_batch_size() == 16


def test_mpu_and_the_calls_a_deepspeed_trial_does_not_have(tmp_path) -> None:
    with hw_ds.init(checkpoint_storage=str(tmp_path)) as context:
        assert context._mpu == hw_ds.ModelParallelUnit(0, 1, True, True)
        custom = hw_ds.ModelParallelUnit(0, 1, True, False)
        with pytest.raises(RuntimeError, match="wrap_model_engine"):
            context.set_mpu(custom)
        built = context.wrap_model_engine(engine())
        with pytest.raises(TypeError, match="ModelParallelUnit"):
            context.set_mpu({"data_parallel_rank": 0})  # type: ignore[arg-type]
        context.set_mpu(custom)
        assert context._mpu is custom
        with pytest.raises(RuntimeError, match="once"):
            context.set_mpu(custom)
        for call, args, hint in [
            (context.wrap_model, (torch.nn.Linear(1, 1),), "wrap_model_engine"),
            (context.wrap_optimizer, (built.optimizer,), "deepspeed.initialize"),
            (context.wrap_lr_scheduler, (None, None), "deepspeed.initialize"),
            (context.backward, (torch.zeros(()),), "engine.backward"),
            (context.step_optimizer, (built.optimizer,), "engine.step"),
            (context.use_amp, (), "fp16 / bf16"),
        ]:
            with pytest.raises(TypeError, match=hint):
                call(*args)
        assert context.to_device({"x": [torch.ones(1)]})["x"][0].device == context.device


def test_single_process_environment_fills_only_what_is_missing() -> None:
    env = {"MASTER_ADDR": "10.0.0.1"}
    added = _setup.single_process_environment(env)
    assert env["RANK"] == env["LOCAL_RANK"] == "0" and env["WORLD_SIZE"] == "1"
    assert env["MASTER_ADDR"] == "10.0.0.1" and "MASTER_ADDR" not in added
    assert 0 < int(env["MASTER_PORT"]) < 65536
    launched = {"WORLD_SIZE": "2", "RANK": "1"}
    assert _setup.single_process_environment(launched) == {} and launched == {
        "WORLD_SIZE": "2",
        "RANK": "1",
    }


def test_the_accelerator_is_chosen_only_when_unset(monkeypatch) -> None:
    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    if not torch.cuda.is_available():
        assert _setup.choose_accelerator() == "cpu"
    monkeypatch.setenv("DS_ACCELERATOR", "cuda")
    assert _setup.choose_accelerator() == "cuda"


def test_the_harness_loads_deepspeed_trial_classes(tmp_path, monkeypatch) -> None:
    (tmp_path / "ds_def.py").write_text(
        "from headway.pytorch.deepspeed import DeepSpeedTrial\n"
        "class MyTrial(DeepSpeedTrial):\n    pass\n"
        "class NotATrial:\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("ds_def", None)
    try:
        assert harness.load_trial_class("ds_def:MyTrial").__name__ == "MyTrial"
        with pytest.raises(harness.EntrypointError, match="DeepSpeedTrial"):
            harness.load_trial_class("ds_def:NotATrial")
    finally:
        sys.modules.pop("ds_def", None)


def test_the_deepspeed_launcher_sets_the_cpu_accelerator() -> None:
    from headway.launch import deepspeed as launch
    from headway.launch import torch_distributed as td

    plan = td.LaunchPlan(nproc_per_node=2)
    env = launch.deepspeed_environment(plan, {"PATH": "/bin"})
    assert env["HEADWAY_CHIEF_IP"] == "127.0.0.1"  # torch_distributed's environment
    if not torch.cuda.is_available():
        assert env["DS_ACCELERATOR"] == "cpu"
    kept = launch.deepspeed_environment(plan, {"DS_ACCELERATOR": "cuda"})
    assert kept["DS_ACCELERATOR"] == "cuda"
    # Usage errors are one line naming this launcher, status 2.
    assert launch.main(["--trial", "model_def:Trial", "extra"]) == 2


# -- from_config ----------------------------------------------------------------------------------

DIGITS_DS = REPO / "examples" / "digits_deepspeed"

# The seed's debugging loop (its docs pass batches; a DeepSpeedTrial takes an iterator).
FROM_CONFIG = """
import json, sys
from headway.pytorch.deepspeed import DeepSpeedTrialContext
from model_def import DigitsDeepSpeedTrial

context = DeepSpeedTrialContext.from_config(json.loads(sys.argv[1]))
trial = DigitsDeepSpeedTrial(context)
batches = iter(trial.build_training_data_loader())
losses = [float(trial.train_batch(batches, 0, i)["loss"]) for i in range(40)]
print(json.dumps({"hparams": context.get_hparams(), "losses": losses,
                  "config": context.get_experiment_config()}))
"""


def test_from_config_draws_hparams_and_gives_a_context_a_trial_trains_with(tmp_path) -> None:
    config = yaml.safe_load((DIGITS_DS / "const.yaml").read_text())
    config["hyperparameters"]["lr"] = {"type": "log", "base": 10, "minval": -2.5, "maxval": -2}
    config["hyperparameters"]["channels"] = {"type": "categorical", "vals": [16, 32]}
    config["reproducibility"] = {"experiment_seed": 7}
    done = subprocess.run(
        [sys.executable, "-c", FROM_CONFIG, json.dumps(config)],
        cwd=DIGITS_DS,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    expected = sample_hparams(config["hyperparameters"], random.Random(7))
    assert out["hparams"] == expected and 10**-2.5 <= expected["lr"] <= 10**-2
    assert out["config"] == config
    losses = out["losses"]
    assert all(loss == loss for loss in losses)  # no NaN
    assert sum(losses[-10:]) < sum(losses[:10]), losses  # the engine trains


def test_from_config_names_what_is_wrong() -> None:
    with pytest.raises(TypeError, match="dict"):
        hw_ds.DeepSpeedTrialContext.from_config([("lr", 1)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"hyperparameters\.lr"):
        hw_ds.DeepSpeedTrialContext.from_config(
            {"hyperparameters": {"lr": {"type": "double", "minval": 1, "maxval": 0}}}
        )
    with pytest.raises(ConfigError, match=r"reproducibility\.experiment_seed"):
        hw_ds.DeepSpeedTrialContext.from_config({"reproducibility": {"experiment_seed": "x"}})
