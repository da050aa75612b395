"""TorchTrainer on Ray (docs/torch-trainer.md "On a Ray cluster"): workers as Ray actors, a lost
worker restored and the group resized, ``as_trainable`` under Ray Tune, ``from_creators``.

One local Ray (started here with its own temporary directory and free ports, stopped at the
end with every process it started) serves the module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
import torch

from headway.torch_trainer import BATCH_SIZE, TorchTrainer, TrainingOperator
from tests.helpers import REPO, require, wait_for_or_false
from tests.torch_trainer_operators import (
    LinearOperator,
    SlotHolder,
    data_creator,
    learning_rate,
    model_creator,
    node_ip,
    optimizer_creator,
    scheduler_creator,
    worker_env,
)

require(importlib.util.find_spec("ray") is not None, "Ray is not installed (the ray extra)")


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray: 4 CPUs and 2 units of a custom ``slot`` resource (to make capacity scarce)."""
    import ray

    temp_dir = tempfile.mkdtemp(prefix="hw-ray-", dir="/tmp")  # short: Ray's socket paths
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    old_path = os.environ.get("PYTHONPATH")
    # Ray's worker processes inherit this; they import tests.torch_trainer_operators by name.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old_path) if p)
    try:
        ray.init(
            num_cpus=4,
            resources={"slot": 2},
            include_dashboard=False,
            _temp_dir=temp_dir,
            logging_level="WARNING",
        )
        yield ray
    finally:
        ray.shutdown()
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        _, alive = psutil.wait_procs(started, timeout=30)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not alive, f"Ray left processes running: {[p.pid for p in alive]}"


def test_workers_are_ray_actors_and_train(local_ray):
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator,
        num_workers=2,
        config={BATCH_SIZE: 16},
        scheduler_step_freq="epoch",
    )
    try:
        assert trainer.on_ray and trainer.num_workers_now == 2
        losses = [trainer.train()["train_loss"] for _ in range(3)]
        assert losses[-1] < losses[0]
        assert trainer.validate()["num_samples"] == 40
        assert trainer.apply_all_workers(worker_env) == [("0", "2", ""), ("1", "2", "")]
        assert trainer.apply_all_workers(node_ip) == [local_ray.util.get_node_ip_address()] * 2
        # The workers are Ray's worker processes, not children of this driver.
        children = {p.pid for p in psutil.Process().children()}
        assert not set(trainer.worker_pids) & children
        assert isinstance(trainer.get_model(), torch.nn.Linear)
    finally:
        trainer.shutdown()


RAY_ADDRESS_DRIVER = """
import json
from headway.torch_trainer import BATCH_SIZE, TorchTrainer
from tests.torch_trainer_operators import LinearOperator

trainer = TorchTrainer(
    training_operator_cls=LinearOperator,
    num_workers=1,
    config={BATCH_SIZE: 32},
    scheduler_step_freq="epoch",
)
print(json.dumps({"on_ray": trainer.on_ray, "epoch": trainer.train()["epoch"]}))
trainer.shutdown()
"""


def test_ray_address_alone_makes_the_trainer_use_that_cluster(local_ray):
    # A driver that never calls ray.init(): RAY_ADDRESS names the cluster.
    address = local_ray.get_runtime_context().gcs_address
    out = subprocess.run(
        [sys.executable, "-c", RAY_ADDRESS_DRIVER],
        env={**os.environ, "RAY_ADDRESS": address},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"on_ray": True, "epoch": 1}


def test_ray_only_resource_arguments_are_checked(local_ray):
    with pytest.raises(ValueError, match="resources_per_worker"):
        TorchTrainer(training_operator_cls=LinearOperator, resources_per_worker={"CPU": 1})
    with pytest.raises(ValueError, match="num_cpus_per_worker"):
        TorchTrainer(training_operator_cls=LinearOperator, num_cpus_per_worker=0)
    with pytest.raises(ValueError, match="needs 1 no_such_thing"):
        TorchTrainer(
            training_operator_cls=LinearOperator, resources_per_worker={"no_such_thing": 1}
        )


def test_a_lost_worker_is_restored_on_what_fits_then_the_group_grows_back(
    local_ray, tmp_path, monkeypatch
):
    from headway.torch_trainer import _ray_group

    monkeypatch.setattr(_ray_group, "PLACE_TIMEOUT_S", 2.0)  # how long a full size may pend
    monkeypatch.setattr(_ray_group, "GROW_PROBE_S", 60.0)  # the freed slot is placed, however slow
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator,
        num_workers=2,
        config={BATCH_SIZE: 16, "crash_marker": str(tmp_path / "crashed"), "crash_epoch": 1},
        scheduler_step_freq="epoch",
        resources_per_worker={"slot": 1},
    )
    try:
        first = trainer.train()
        # Both slots are the trainer's: the holder waits for one, and takes the first that
        # frees, so the restarted group fits only one worker (RaySGD's resize).
        holder = local_ray.remote(SlotHolder).options(num_cpus=0, resources={"slot": 1}).remote()
        second = trainer.train()  # worker 1 SIGKILLs itself in its second epoch
        assert trainer.num_failures == 1
        assert trainer.num_workers_now == 1
        assert local_ray.get(holder.ping.remote())
        assert (first["epoch"], second["epoch"]) == (1, 2)  # restored, not restarted
        assert second["num_samples"] == first["num_samples"]  # one worker, the whole data
        assert trainer.apply_all_workers(worker_env) == [("0", "1", "")]
        local_ray.kill(holder)
        # The trainer grows when Ray lists a free slot: wait until Ray has freed the holder's.
        assert wait_for_or_false(lambda: local_ray.available_resources().get("slot", 0) >= 1, 60)
        third = trainer.train()  # room for two again: the group grows before the epoch
        assert trainer.num_workers_now == 2
        assert third["epoch"] == 3
        assert trainer.apply_all_operators(learning_rate) == [0.1 * 0.5**3] * 2
    finally:
        trainer.shutdown()


def test_as_trainable_runs_trials_under_tune(local_ray, tmp_path):
    from ray import tune

    trainable = TorchTrainer.as_trainable(
        training_operator_cls=LinearOperator,
        num_workers=1,
        config={BATCH_SIZE: 16},
        scheduler_step_freq="epoch",
    )
    assert trainable.default_resource_request({}).bundles == [{"CPU": 1.0}, {"CPU": 1.0}]
    tuner = tune.Tuner(
        trainable,
        param_space={"lr": tune.grid_search([0.05, 0.1])},
        run_config=tune.RunConfig(
            stop={"training_iteration": 2},
            storage_path=str(tmp_path),
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    )
    results = tuner.fit()
    assert not results.errors
    assert sorted(r.config["lr"] for r in results) == [0.05, 0.1]
    for result in results:
        assert result.metrics["training_iteration"] == 2
        assert result.metrics["epoch"] == 2
        assert {"train_loss", "val_loss", "val_accuracy"} <= set(result.metrics)
        with result.checkpoint.as_directory() as folder:  # trainer.save's file
            state = torch.load(Path(folder) / "trainer.pt", weights_only=False)
        assert state["epoch"] == 2


def test_as_trainable_needs_an_explicit_use_gpu():
    with pytest.raises(ValueError, match="use_gpu"):
        TorchTrainer.as_trainable(training_operator_cls=LinearOperator, use_gpu="auto")


def _creator_operator() -> type[TrainingOperator]:
    return TrainingOperator.from_creators(
        model_creator,
        optimizer_creator,
        data_creator=data_creator,
        loss_creator=torch.nn.MSELoss,
        scheduler_creator=scheduler_creator,
    )


def test_from_creators_makes_an_operator_class_that_pickles():
    # Plain pickle, as the workers on this host receive their operator class.
    cls = pickle.loads(pickle.dumps(_creator_operator()))
    assert issubclass(cls, TrainingOperator)
    operator = cls({BATCH_SIZE: 16}, scheduler_step_freq="epoch")
    assert isinstance(operator.model, torch.nn.Linear)
    assert isinstance(operator.criterion, torch.nn.MSELoss)
    assert len(operator.schedulers) == 1
    assert len(operator.train_loader.dataset) == 96
    assert len(operator.validation_loader.dataset) == 40
    with pytest.raises(TypeError, match="data_creator"):
        TrainingOperator.from_creators(model_creator, optimizer_creator, data_creator=3)


def test_from_creators_operator_trains_on_ray(local_ray):
    trainer = TorchTrainer(
        training_operator_cls=_creator_operator(),
        num_workers=2,
        config={BATCH_SIZE: 16, "lr": 0.05},
        scheduler_step_freq="epoch",
    )
    try:
        losses = [trainer.train()["train_loss"] for _ in range(2)]
        assert losses[1] < losses[0]
        assert trainer.apply_all_operators(learning_rate) == [0.05 * 0.5**2] * 2
    finally:
        trainer.shutdown()
