"""headway.torch_trainer: RaySGD's TorchTrainer / TrainingOperator API (docs/torch-trainer.md).

Argument checks, batch-size division, averaging and the operator's default loops run in this
process; a module-scoped trainer with two gloo workers covers what needs the workers; the seed
example runs as its own program.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from headway.torch_trainer import (
    BATCH_SIZE,
    NUM_SAMPLES,
    AverageMeterCollection,
    TorchTrainer,
    TrainingOperator,
)
from headway.torch_trainer._args import UNSUPPORTED, reduce_stats, split_batch_size
from headway.torch_trainer._data import iterate
from tests.helpers import REPO
from tests.torch_trainer_operators import (
    ROWS,
    LinearOperator,
    device_type,
    learning_rate,
    mark_hook,
    operator_extra,
    per_worker_batch_size,
    raise_value_error,
    worker_env,
)

EXAMPLE = REPO / "examples" / "torch_trainer" / "train.py"


# -- in this process ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_raysgd_arguments_that_cannot_work_are_rejected_by_name(name):
    with pytest.raises(ValueError, match=name):
        TorchTrainer(training_operator_cls=LinearOperator, **{name: 1})


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"training_operator_cls": nn.Linear}, TypeError, "training_operator_cls"),
        ({"num_workers": 0}, ValueError, "num_workers"),
        ({"backend": "mpi"}, ValueError, "backend"),
        ({"backend": "nccl", "use_gpu": False}, ValueError, "backend"),
        ({"use_fp16": "apex"}, ValueError, "use_fp16"),
        ({"use_gpu": "yes"}, ValueError, "use_gpu"),
        ({"scheduler_step_freq": "hourly"}, ValueError, "scheduler_step_freq"),
        ({"timeout_s": 0}, ValueError, "timeout_s"),
        ({"config": [1]}, TypeError, "config"),
        ({"initialization_hook": lambda: None}, TypeError, "initialization_hook"),
        ({"wrap_ddp": "yes"}, ValueError, "wrap_ddp"),
        ({"use_local": True}, ValueError, "use_local"),
        ({"config": {BATCH_SIZE: 1}, "num_workers": 2}, ValueError, "BATCH_SIZE"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs, error, name):
    kwargs = {"training_operator_cls": LinearOperator, **kwargs}
    with pytest.raises(error, match=name):
        TorchTrainer(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_use_gpu_without_cuda_devices_is_rejected():
    with pytest.raises(ValueError, match="use_gpu=True"):
        TorchTrainer(training_operator_cls=LinearOperator, use_gpu=True)


def test_the_global_batch_size_is_divided_among_workers(caplog):
    config = {BATCH_SIZE: 64, "lr": 0.1}
    assert split_batch_size(config, 2) == {BATCH_SIZE: 32, "lr": 0.1}
    assert config[BATCH_SIZE] == 64
    assert split_batch_size({"lr": 0.1}, 4) == {"lr": 0.1}  # no BATCH_SIZE: left alone
    indivisible = {BATCH_SIZE: 7}
    with caplog.at_level(logging.WARNING, logger="headway.torch_trainer"):
        assert split_batch_size(indivisible, 2) == {BATCH_SIZE: 3}
    assert indivisible[BATCH_SIZE] == 6  # lowered to a multiple, as RaySGD does
    assert "from 7 to 6" in caplog.text


def test_results_are_averaged_across_workers_with_num_samples_summed():
    stats = reduce_stats(
        [
            {NUM_SAMPLES: 10, "loss": 1.0, "acc": math.nan, "profile": {"a": 1}, "epoch": 2},
            {NUM_SAMPLES: 6, "loss": 3.0, "acc": 0.5, "profile": {"a": 2}, "epoch": 2},
        ]
    )
    assert stats == {NUM_SAMPLES: 16, "loss": 2.0, "acc": 0.5, "profile": {"a": 1}, "epoch": 2}


def test_average_meter_collection_weighs_batches_by_samples():
    meters = AverageMeterCollection()
    meters.update({"loss": 0.5, "acc": 0.5}, n=32)
    meters.update({"loss": 0.1, "acc": 0.9}, n=96)
    summary = meters.summary()
    assert summary["batch_count"] == 2 and summary[NUM_SAMPLES] == 128
    assert summary["loss"] == pytest.approx(0.2) and summary["last_loss"] == 0.1
    assert summary["acc"] == pytest.approx(0.8) and summary["last_acc"] == 0.9


def test_num_steps_takes_exactly_that_many_batches_starting_the_loader_over():
    assert list(iterate([1, 2, 3], None)) == [1, 2, 3]
    assert list(iterate([1, 2, 3], 2)) == [1, 2]
    assert list(iterate([1, 2, 3], 7)) == [1, 2, 3, 1, 2, 3, 1]
    assert list(iterate([], 3)) == []


def test_an_operator_in_this_process_trains_validates_and_round_trips_its_state():
    operator = LinearOperator({BATCH_SIZE: 16}, scheduler_step_freq="epoch")
    assert isinstance(operator.model, nn.Linear)  # one process: no DDP wrapper
    assert operator.world_rank == 0 and operator.world_size == 1
    assert operator.device == torch.device("cpu") and operator.device_ids is None
    stats = operator.train_epoch(iter(operator.train_loader), {})
    assert stats["batch_count"] == ROWS // 16 and stats[NUM_SAMPLES] == ROWS
    assert {"train_loss", "last_train_loss"} <= set(stats)
    assert operator.scheduler.get_last_lr() == [0.05]  # stepped once, after the epoch
    val = operator.validate(iter(operator.validation_loader), {})
    assert {"val_loss", "val_accuracy", "last_val_loss", "last_val_accuracy"} <= set(val)
    state = operator._full_state(epochs=1)
    other = LinearOperator({BATCH_SIZE: 16}, scheduler_step_freq="epoch")
    assert other._load_full_state(state) == 1
    assert torch.equal(other.model.weight, operator.model.weight)
    assert other.extra == {"setups": 1, "loaded": True}  # the operator's own state_dict


def test_use_tqdm_shows_a_progress_bar_on_rank_0(capsys):
    operator = LinearOperator({BATCH_SIZE: 16}, use_tqdm=True, scheduler_step_freq="manual")
    operator.train_epoch(iter(operator.train_loader), {"epoch_idx": 0})
    assert "6/6" in capsys.readouterr().err  # tqdm's bar: 96 rows / 16 per batch
    quiet = LinearOperator(
        {BATCH_SIZE: 16}, world_rank=1, use_tqdm=True, scheduler_step_freq="manual"
    )
    quiet.train_epoch(iter(quiet.train_loader), {"epoch_idx": 0})
    assert capsys.readouterr().err == ""


def test_use_fp16_on_the_cpu_trains_under_bfloat16_autocast():
    operator = LinearOperator({BATCH_SIZE: 16}, use_fp16=True, scheduler_step_freq="manual")
    assert operator.grad_scaler is None  # bfloat16 needs no loss scaling
    with operator.autocast():
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert operator.model(torch.ones(2, 1)).dtype == torch.bfloat16
    stats = operator.train_epoch(iter(operator.train_loader), {})
    assert math.isfinite(stats["train_loss"])
    assert operator.model.weight.dtype == torch.float32  # the weights stay float32


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_use_gpu_with_fp16_trains_on_cuda_with_a_grad_scaler():
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator,
        num_workers=1,
        use_gpu=True,
        use_fp16=True,
        config={BATCH_SIZE: 16},
        scheduler_step_freq="manual",
    )
    try:
        first, second = trainer.train(), trainer.train()
        assert second["train_loss"] < first["train_loss"]
        assert trainer.apply_all_operators(device_type) == ["cuda"]
        assert "amp" in trainer.state_dict()  # the GradScaler's state is saved
    finally:
        trainer.shutdown()


def test_register_checks_its_arguments():
    class Plain(TrainingOperator):
        def setup(self, config):
            pass

    operator = Plain({})
    opt = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="apex_args"):
        operator.register(models=nn.Linear(1, 1), optimizers=opt, apex_args={})
    with pytest.raises(ValueError, match="scheduler_step_freq"):
        operator.register(models=nn.Linear(1, 1), optimizers=opt, schedulers=object())
    with pytest.raises(TypeError, match="models"):
        operator.register(models=[object()], optimizers=opt)
    models, optimizers = operator.register(models=[nn.Linear(1, 1)], optimizers=(opt,))
    assert isinstance(models, list) and isinstance(optimizers, tuple)
    with pytest.raises(RuntimeError, match="criterion"):
        operator.train_batch((torch.zeros(2, 1), torch.zeros(2, 1)), {})
    with pytest.raises(NotImplementedError):
        TrainingOperator({})


# -- two gloo workers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trainer():
    # 7 does not divide by 2: each worker gets 3 and the global size becomes 6.
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator,
        num_workers=2,
        config={BATCH_SIZE: 7, "lr": 0.05},
        scheduler_step_freq="manual",
        initialization_hook=mark_hook,
    )
    yield trainer
    trainer.shutdown()


@pytest.mark.slow
def test_workers_get_their_share_of_the_batch_and_results_are_averaged(trainer):
    assert trainer.config[BATCH_SIZE] == 6
    assert trainer.apply_all_operators(per_worker_batch_size) == [3, 3]
    assert trainer.apply_all_workers(worker_env) == [("0", "2", "ran"), ("1", "2", "ran")]
    per_worker = trainer.train(reduce_results=False)
    assert [s[NUM_SAMPLES] for s in per_worker] == [ROWS // 2, ROWS // 2]  # sampler shards
    assert [s["batch_count"] for s in per_worker] == [16, 16]
    first_epoch = per_worker[0]["epoch"]
    averaged = trainer.train(profile=True)
    assert averaged["epoch"] == first_epoch + 1
    assert averaged[NUM_SAMPLES] == ROWS  # summed over the workers
    assert {"mean_fwd_s", "mean_grad_s", "mean_apply_s", "mean_train_epoch_s"} <= set(
        averaged["profile"]
    )
    steps = trainer.train(num_steps=5, reduce_results=False)
    assert [s["batch_count"] for s in steps] == [5, 5]
    val = trainer.validate()
    assert val[NUM_SAMPLES] == 40 and {"val_loss", "val_accuracy"} <= set(val)
    assert trainer.validate(num_steps=2)["batch_count"] == 2
    trainer.update_scheduler(0.0)  # StepLR.step(epoch=0.0): the lr of epoch 0 again
    assert trainer.apply_all_operators(learning_rate) == [0.05, 0.05]


@pytest.mark.slow
def test_save_load_get_model_and_the_local_operator(trainer, tmp_path):
    trainer.train()
    path = trainer.save(tmp_path / "trainer.pt")
    saved = torch.load(path, weights_only=False)
    model = trainer.get_model()
    assert isinstance(model, nn.Linear)  # unwrapped from DDP
    assert torch.equal(model.weight.detach(), saved["models"][0]["weight"])
    trainer.train()
    assert not torch.equal(trainer.get_model().weight.detach(), saved["models"][0]["weight"])
    trainer.load(path)
    assert torch.equal(trainer.get_model().weight.detach(), saved["models"][0]["weight"])
    assert trainer.train()["epoch"] == saved["epoch"] + 1  # the epoch count came back too
    assert trainer.apply_all_operators(operator_extra) == [{"setups": 1, "loaded": True}] * 2
    local = trainer.get_local_operator()
    assert local.world_size == 1 and isinstance(local.model, nn.Linear)
    assert torch.equal(local.model.weight, trainer.get_model().weight)
    with pytest.raises(ValueError, match="num_steps"):
        trainer.train(num_steps=0)
    with pytest.raises(ValueError, match="max_retries"):
        trainer.train(max_retries=-1)
    with pytest.raises(ValueError, match="dataset"):
        trainer.train(dataset=[1])
    with pytest.raises(TypeError, match="info"):
        trainer.validate(info=[1])


@pytest.mark.slow
def test_a_worker_exception_is_raised_with_its_traceback_and_not_retried(trainer):
    before = trainer.get_model().weight.detach().clone()
    failures = trainer.num_failures
    with pytest.raises(RuntimeError, match="raised by a worker on purpose"):
        trainer.apply_all_workers(raise_value_error)
    assert trainer.num_failures == failures  # a bug, not a lost worker
    # The next call starts a new group from the last good state.
    assert torch.equal(trainer.get_model().weight.detach(), before)
    assert trainer.validate()[NUM_SAMPLES] == 40


def run_program(args: list[str], cwd, **extra: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``cwd`` outside any cluster, one torch thread, output captured."""
    outside = ("HEADWAY_CLUSTER_INFO", "HEADWAY_SLOT_IDS")
    env = {k: v for k, v in os.environ.items() if k not in outside}
    env.update(OMP_NUM_THREADS="1", **extra)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_the_seed_example_trains_two_gloo_workers_and_returns_averaged_stats(tmp_path):
    done = run_program([str(EXAMPLE), "--seed-only"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("trained weight:") for line in lines)
    stats = json.loads(lines[-1])
    assert stats["epoch"] == 5
    assert stats[NUM_SAMPLES] == 400  # validation: both workers' 200 rows
    assert stats["batch_count"] == 7  # 200 rows per worker, 32 per batch
    assert stats["val_loss"] < 10 and math.isfinite(stats["train_loss"])


# Runs as its own program: the agent tees the workers' output to that program's stdout.
TWO_WRITES = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from headway.torch_trainer import BATCH_SIZE, TorchTrainer
from tests.torch_trainer_operators import LinearOperator, print_in_two_writes
trainer = TorchTrainer(
    training_operator_cls=LinearOperator, num_workers=2, config={{BATCH_SIZE: 4}},
    scheduler_step_freq="manual",
)
trainer.apply_all_workers(print_in_two_writes)
trainer.shutdown()
"""


@pytest.mark.slow
def test_a_worker_line_written_in_two_calls_comes_out_whole_with_one_prefix(tmp_path):
    done = run_program(["-c", TWO_WRITES], tmp_path, PYTHONUNBUFFERED="1")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("[rank=")]
    assert sorted(lines) == [f'[rank={rank}] || {{"rank": {rank}}}' for rank in (0, 1)]
