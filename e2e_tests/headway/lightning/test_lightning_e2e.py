"""The Lightning example (examples/lightning) as a Headway experiment on a real cluster:
paused mid-run (HeadwayCallback saves and stops), activated, resumed from that checkpoint by
the Trainer (latest_checkpoint_path) and completed, every logged step stored once."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from e2e_tests.headway.lightning._pause import pause_then_complete
from registry.models import MetricReport
from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "lightning"
EPOCHS = 30
MAX_STEPS = EPOCHS * 45  # 1,437 training images in batches of 32


def test_the_lightning_example_pauses_and_resumes_from_its_checkpoint(cluster_api):
    trial = cluster_api.submit(
        EXAMPLE / "const.yaml", EXAMPLE, entrypoint=f"python train.py --max-epochs {EPOCHS}"
    )
    trial_id = trial["id"]
    paused, done = pause_then_complete(cluster_api, trial_id, MAX_STEPS)
    paused_at = paused["steps_completed"]
    assert done["run_id"] == 2

    # Run 2 resumed at the checkpoint: it reported no step at or before it.
    reports = MetricReport.objects.filter(trial_id=trial_id, group="training")
    by_step = dict(reports.values_list("steps_completed", "run_id"))
    assert {run for step, run in by_step.items() if step <= paused_at} == {1}
    assert {run for step, run in by_step.items() if step > paused_at} == {2}
    # Every 10th step once (log_every_n_steps=10) across the two runs, and the step the pause
    # stopped at (Lightning logs the step metrics of the batch it stops after).
    steps, _ = cluster_api.series(trial_id, "training", "train_loss_step")
    assert steps == sorted({*range(10, MAX_STEPS + 1, 10), paused_at})
    steps, _ = cluster_api.series(trial_id, "validation", "val_loss")
    assert (
        set(range(45, MAX_STEPS + 1, 45))
        <= set(steps)
        <= {*range(45, MAX_STEPS + 1, 45), paused_at}
    )
    # ModelCheckpoint(monitor="val_loss") saves at epoch ends where val_loss improved; the
    # stopped epoch ends at the pause, whose own checkpoint is there too.
    results = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    saved = sorted(c["steps_completed"] for c in results)
    assert paused_at in saved and set(saved) <= {*range(45, MAX_STEPS + 1, 45), paused_at}
    assert all(
        c["metadata"]["lightning"].get("monitor") == "val_loss"
        for c in results
        if not c["metadata"]["lightning"].get("preempted")
    )
