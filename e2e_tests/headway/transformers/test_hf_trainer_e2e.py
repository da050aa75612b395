"""The Hugging Face Trainer example (examples/hf_trainer) as a Headway experiment on a real
cluster: its metrics and checkpoints in the registry, paused mid-run (the callback saves and
stops), activated, resumed from that checkpoint by the Trainer and completed, every metric at
each of its steps once."""

from __future__ import annotations

import pytest

from registry.models import MetricReport
from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "hf_trainer"
MAX_STEPS = 60
ENTRYPOINT = (
    "python image_classification.py --output_dir ./out --do_train --do_eval "
    f"--max_steps {MAX_STEPS} --per_device_train_batch_size 32 --max_eval_samples 64 "
    "--logging_steps 5 --eval_strategy steps --eval_steps 20 --save_strategy steps "
    "--save_steps 20 --report_to none"
)


def test_the_hf_trainer_example_pauses_and_resumes_from_its_checkpoint(cluster_api):
    trial = cluster_api.submit(EXAMPLE / "const.yaml", EXAMPLE, entrypoint=ENTRYPOINT)
    trial_id = trial["id"]
    cluster_api.wait_trial(trial_id, lambda t: t["steps_completed"] >= 5, "the first log")
    cluster_api.post(f"trials/{trial_id}/pause")
    cluster_api.wait_trial(
        trial_id, lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    checkpoints = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    paused_at = max(c["steps_completed"] for c in checkpoints)  # saved when it saw the pause
    assert 5 <= paused_at < MAX_STEPS
    cluster_api.post(f"trials/{trial_id}/activate")
    done = cluster_api.wait_trial(trial_id, lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2

    # Run 2 resumed after the checkpoint: it reported no step at or before it.
    runs = MetricReport.objects.filter(trial_id=trial_id, group="training")
    by_step = dict(runs.values_list("steps_completed", "run_id"))
    assert {step: run for step, run in by_step.items() if step <= paused_at} == {
        step: 1 for step in by_step if step <= paused_at
    }
    assert {run for step, run in by_step.items() if step > paused_at} == {2}
    # Each logged step once: run 1's logs up to the pause, run 2's after its checkpoint.
    steps, _ = cluster_api.series(trial_id, "training", "loss")
    assert steps == list(range(5, MAX_STEPS + 1, 5))
    steps, _ = cluster_api.series(trial_id, "training", "train_loss")
    assert steps == [paused_at, MAX_STEPS]  # each run's summary, at the step it ended
    # The example evaluates after train() returns, as Determined's does: at the paused step too.
    evaluated = sorted({paused_at, 20, 40, 60})
    assert cluster_api.series(trial_id, "validation", "eval_accuracy")[0] == evaluated
    assert cluster_api.series(trial_id, "validation", "eval_loss")[0] == evaluated
    checkpoints = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    saved = sorted(c["steps_completed"] for c in checkpoints)
    assert paused_at in saved and saved[-1] == MAX_STEPS
