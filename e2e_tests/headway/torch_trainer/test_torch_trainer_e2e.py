"""The TorchTrainer example (examples/torch_trainer) as a Headway experiment on a real cluster:
two worker processes under the trial's two slots, metrics and checkpoints in the registry,
paused after an epoch, activated, resumed from its checkpoint with ``trainer.load`` and
completed."""

from __future__ import annotations

import io
import json
import shutil

import pytest
import torch

from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "torch_trainer"
EPOCHS = 3
STEPS_PER_EPOCH = 16  # 1000 rows, 500 per worker, 32 per worker batch


def epochs_printed(lines: list[str], run_id: int) -> list[int]:
    """Epochs the example's driver printed (``{"epoch": N, ...}``) during run ``run_id``."""
    epochs, inside = [], False
    for line in lines:
        if line.startswith("[headway] run ") and " of trial " in line and " starting " in line:
            inside = line.startswith(f"[headway] run {run_id} ")
        elif inside and line.startswith('{"epoch": '):
            epochs.append(json.loads(line)["epoch"])
    return epochs


def test_the_torch_trainer_example_reports_checkpoints_pauses_and_resumes(cluster_api):
    trial = cluster_api.submit(
        EXAMPLE / "torch_trainer.yaml",
        EXAMPLE,
        hyperparameters={"batch_sleep": 0.05},  # ~1 s per epoch: time to pause mid-run
        searcher={"max_length": {"epochs": EPOCHS}},
    )
    trial_id = trial["id"]
    cluster_api.wait_trial(trial_id, lambda t: t["steps_completed"] >= STEPS_PER_EPOCH, "epoch 1")
    cluster_api.post(f"trials/{trial_id}/pause")
    paused = cluster_api.wait_trial(
        trial_id, lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    paused_epoch = paused["steps_completed"] // STEPS_PER_EPOCH
    assert 1 <= paused_epoch < EPOCHS
    cluster_api.post(f"trials/{trial_id}/activate")
    done = cluster_api.wait_trial(trial_id, lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["steps_completed"] == EPOCHS * STEPS_PER_EPOCH

    logs = cluster_api.logs(trial_id)
    assert epochs_printed(logs, 1) == list(range(1, paused_epoch + 1))
    assert epochs_printed(logs, 2) == list(range(paused_epoch + 1, EPOCHS + 1))  # resumed
    expected = [STEPS_PER_EPOCH * (epoch + 1) for epoch in range(EPOCHS)]
    steps, _losses = cluster_api.series(trial_id, "training", "train_loss")
    assert steps == expected  # each epoch once: run 2 continued after the checkpoint
    val_steps, val_losses = cluster_api.series(trial_id, "validation", "val_loss")
    assert val_steps == expected and val_losses[-1] < val_losses[0]
    assert cluster_api.series(trial_id, "training", "num_samples")[1] == [1000] * EPOCHS

    checkpoints = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    latest = max(checkpoints, key=lambda c: c["steps_completed"])
    assert latest["steps_completed"] == expected[-1]
    response = cluster_api.http.get(
        f"{cluster_api.url}/api/v1/checkpoints/{latest['uuid']}/download",
        params={"path": "trainer.pt"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    state = torch.load(io.BytesIO(response.content), weights_only=False)
    assert state["epoch"] == EPOCHS  # the workers' epoch count, restored across the pause
    assert abs(state["models"][0]["weight"].item() - 2) < 1.5


FAILING_DRIVER = """
from headway.torch_trainer import BATCH_SIZE, TorchTrainer
from train import MyTrainingOperator

if __name__ == "__main__":
    trainer = TorchTrainer(
        training_operator_cls=MyTrainingOperator, num_workers=2, config={BATCH_SIZE: 64}
    )
    trainer.train(num_steps=1)
    raise ValueError("the driver fails on purpose")  # no trainer.shutdown()
"""


def test_a_driver_that_raises_without_shutdown_ends_its_trial_in_error(cluster_api, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(EXAMPLE, model_dir)
    (model_dir / "fail.py").write_text(FAILING_DRIVER)
    trial = cluster_api.submit(
        EXAMPLE / "torch_trainer.yaml", model_dir, entrypoint="python fail.py", max_restarts=0
    )
    # Before, the driver's exit waited forever on its workers: the trial stayed RUNNING on
    # both slots until killed.
    ended = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] == "ERROR" and t["run_state"] == "EXITED", "ERROR"
    )
    assert ended["run_id"] == 1
    logs = cluster_api.logs(trial["id"])
    assert any("ValueError: the driver fails on purpose" in line for line in logs)
