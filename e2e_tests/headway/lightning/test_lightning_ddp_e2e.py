"""The Lightning example (examples/lightning/distributed.yaml) as a 2-slot trial on a real
cluster: two DDP ranks (gloo) under ``headway.launch.torch_distributed`` (torchrun), paused
mid-run (HeadwayCallback saves on rank zero and both ranks stop), activated, resumed from that
checkpoint by both ranks (latest_checkpoint_path) and completed; only rank zero reports."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from e2e_tests.headway.lightning._pause import pause_then_complete
from e2e_tests.workers.test_distributed_e2e import run_lines
from registry.models import MetricReport
from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "lightning"
EPOCHS = 12
STEPS_PER_EPOCH = 23  # 1,437 training images over two ranks (719 each) in batches of 32
MAX_STEPS = EPOCHS * STEPS_PER_EPOCH
ENTRYPOINT = f"python -m headway.launch.torch_distributed python train.py --max-epochs {EPOCHS}"


def rank_lines(lines: list[str], rank: int, text: str) -> list[str]:
    """Lines rank ``rank`` printed (``[rank=N] || ...``) that contain ``text``."""
    return [line for line in lines if line.startswith(f"[rank={rank}] || ") and text in line]


def test_the_lightning_example_on_two_slots_pauses_and_both_ranks_resume(cluster_api):
    trial = cluster_api.submit(EXAMPLE / "distributed.yaml", EXAMPLE, entrypoint=ENTRYPOINT)
    trial_id = trial["id"]
    paused, done = pause_then_complete(cluster_api, trial_id, MAX_STEPS)
    paused_at = paused["steps_completed"]
    assert done["run_id"] == 2 and done["restarts"] == 0

    lines = cluster_api.logs(trial_id)
    first, second = run_lines(lines, 1), run_lines(lines, 2)
    for rank in (0, 1):
        # Both runs had both ranks in one DDP group.
        for run in (first, second):
            assert rank_lines(run, rank, f"GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2"), rank
        # Each rank restored the checkpoint saved at the pause and continued at its step.
        restored = rank_lines(second, rank, "restoring checkpoint ")
        assert len(restored) == 1 and f" {paused['uuid']} at step {paused_at}:" in (restored[0]), (
            restored
        )
        assert rank_lines(second, rank, f"rank {rank} resumes at step {paused_at} "), rank
        assert not rank_lines(first, rank, "restoring checkpoint ")  # a new trial
    # Rank zero alone registered the pause's checkpoint.
    assert len(rank_lines(first, 0, f"preempted at step {paused_at}: checkpoint ")) == 1
    assert not rank_lines(lines, 1, "preempted at step ")

    # Run 2 resumed at the checkpoint: it reported no step at or before it (a step reported
    # again takes the later run's id).
    for group in ("training", "validation"):
        reports = MetricReport.objects.filter(trial_id=trial_id, group=group)
        by_step = dict(reports.values_list("steps_completed", "run_id"))
        assert {run for step, run in by_step.items() if step <= paused_at} == {1}, group
        assert {run for step, run in by_step.items() if step > paused_at} == {2}, group
    # Every 10th step once (log_every_n_steps=10) across the two runs, and the step the pause
    # stopped at (Lightning logs the step metrics of the batch it stops after): none missing,
    # none twice.
    steps, _ = cluster_api.series(trial_id, "training", "train_loss_step")
    assert steps == sorted({*range(10, MAX_STEPS + 1, 10), paused_at})
    ends = range(STEPS_PER_EPOCH, MAX_STEPS + 1, STEPS_PER_EPOCH)
    steps, _ = cluster_api.series(trial_id, "training", "train_loss_epoch")
    assert set(ends) <= set(steps) <= {*ends, paused_at}
    steps, _ = cluster_api.series(trial_id, "validation", "val_loss")
    assert set(ends) <= set(steps) <= {*ends, paused_at}
    # ModelCheckpoint files (epoch ends where val_loss improved) and the pause's own.
    results = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    saved = sorted(c["steps_completed"] for c in results)
    assert paused_at in saved and set(saved) <= {*ends, paused_at}
    assert max(saved) > paused_at  # the resumed run went on saving
