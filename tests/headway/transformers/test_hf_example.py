"""examples/hf_trainer/image_classification.py (Determined's hf_image_classification ported)
run as a trial process against a live registry: its filtered metrics at the Trainer's steps and
its checkpoints, each with the example's user data."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from registry import lifecycle
from registry.models import Checkpoint, MetricReport, Trial
from tests.helpers import create_experiment, start_run

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "hf_trainer"


def test_the_example_reports_and_checkpoints(api, live_server, tmp_path: pathlib.Path) -> None:
    config = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    config["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
    response = create_experiment(api, config=yaml.safe_dump(config))
    assert response.status_code == 201, response.json()
    trial = Trial.objects.get(experiment_id=response.json()["id"])
    run = start_run(trial)
    trial.refresh_from_db()
    info = {
        "master_url": live_server.url,
        "token": run.token,
        "experiment_id": trial.experiment_id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "hparams": trial.hparams,
        "trial_seed": 1,
        "latest_checkpoint": None,
        "experiment_config": trial.experiment.config,
    }
    (tmp_path / "info.json").write_text(json.dumps(info))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    env |= {"HEADWAY_CLUSTER_INFO": str(tmp_path / "info.json"), "HEADWAY_SYSTEM_METRICS": "0"}
    # const.yaml's entrypoint, shortened: 20 steps, logs every 5, evaluates and saves every 10.
    args = ["--output_dir", "out", "--do_train", "--do_eval", "--max_steps", "20"]
    args += ["--per_device_train_batch_size", "32", "--max_eval_samples", "64"]
    args += ["--logging_steps", "5", "--eval_strategy", "steps", "--eval_steps", "10"]
    args += ["--save_strategy", "steps", "--save_steps", "10", "--report_to", "none"]
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "image_classification.py"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def stored(group: str) -> dict[int, dict]:
        rows = MetricReport.objects.filter(trial=trial, group=group).order_by("steps_completed")
        return {r.steps_completed: r.metrics for r in rows}

    training, validation = stored("training"), stored("validation")
    assert list(training) == [5, 10, 15, 20]
    assert list(validation) == [10, 20]
    # filter_metrics=["loss", "accuracy"]: the names holding those, plus batches and epochs.
    assert set(training[20]) == {"loss", "train_loss", "batches", "epochs"}
    assert set(validation[10]) == {"eval_loss", "eval_accuracy", "batches", "epochs"}
    checkpoints = Checkpoint.objects.filter(trial=trial).order_by("steps_completed")
    assert [c.steps_completed for c in checkpoints] == [10, 20]
    for c in checkpoints:
        assert f"checkpoint-{c.steps_completed}/my_data.json" in c.resources
        assert c.metadata["user_data"]["dataset"] == "sklearn-digits"
    # The hyperparameters' training_arguments reached the Trainer: learning_rate 1e-3 (linear
    # decay over 20 steps), not the Trainer's default 5e-5.
    saved = json.loads((tmp_path / "out" / "checkpoint-20" / "trainer_state.json").read_text())
    assert saved["log_history"][0]["learning_rate"] > 5e-4
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=run.run_id, exit_code=0)
