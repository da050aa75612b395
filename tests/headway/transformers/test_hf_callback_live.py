"""``headway.transformers.DetCallback`` in a Hugging Face Trainer against a live registry: the
Trainer's train and eval metrics at its steps (every metric it logged, the two logs of its last
step merged), its checkpoints registered with ``steps_completed``, the searcher's operation
completed, and a pause that saves and stops, then a resume from that checkpoint."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import transformers

from headway import core
from headway.transformers import DetCallback, HeadwayCallback
from registry import lifecycle
from registry.models import Checkpoint, MetricReport, State, Trial
from tests.headway.transformers import tiny_trainer
from tests.helpers import create_experiment, start_run, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
name: hf-trainer
entrypoint: python train.py
searcher: {name: single, metric: eval_loss, max_length: {batches: 12}}
"""


@pytest.fixture
def trial(api, live_server, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Trial:
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
    response = create_experiment(
        api, config=CONFIG + f"checkpoint_storage: {json.dumps(storage)}\n"
    )
    assert response.status_code == 201, response.json()
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    monkeypatch.chdir(tmp_path)
    return Trial.objects.get(experiment_id=response.json()["id"])


def run_process(trial: Trial, live_server, tmp_path: pathlib.Path, monkeypatch) -> None:
    """What a worker gives the trial process: a started run and its cluster info."""
    run = start_run(trial)
    trial.refresh_from_db()
    latest = Checkpoint.objects.filter(uuid=trial.latest_checkpoint).first()
    info = {
        "master_url": live_server.url,
        "token": run.token,
        "experiment_id": trial.experiment_id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "hparams": trial.hparams,
        "trial_seed": 1,
        "latest_checkpoint": str(latest.uuid) if latest else None,
        "latest_checkpoint_steps": latest.steps_completed if latest else None,
        "experiment_config": trial.experiment.config,
        "searcher_length": trial.searcher_length,
    }
    path = tmp_path / f"run-{run.run_id}.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))


def stored(trial: Trial, group: str) -> dict[int, dict[str, Any]]:
    rows = MetricReport.objects.filter(trial=trial, group=group).order_by("steps_completed")
    return {r.steps_completed: r.metrics for r in rows}


def logged(history: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The Trainer's own log history by (group, step), later logs of a step winning."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for entry in history:
        group = "validation" if any(k.startswith("eval_") for k in entry) else "training"
        values = {k: v for k, v in entry.items() if k not in ("epoch", "step")}
        out.setdefault((group, entry["step"]), {}).update(values)
    return out


def assert_every_logged_metric_stored(trial: Trial, history: list[dict[str, Any]]) -> None:
    for (group, step), values in logged(history).items():
        metrics = stored(trial, group)[step]
        for name, value in values.items():
            assert metrics[name] == pytest.approx(value), (group, step, name)
        assert metrics["batches"] == step


def test_metrics_checkpoints_and_searcher_of_a_trainer_run(
    trial: Trial, live_server, tmp_path: pathlib.Path, monkeypatch
) -> None:
    run_process(trial, live_server, tmp_path, monkeypatch)
    args = tiny_trainer.training_args(tmp_path / "out")
    with core.init() as ctx:
        callback = DetCallback(ctx, args, user_data={"dataset": "parity"})
        hf = tiny_trainer.trainer(args, [callback])
        hf.train(resume_from_checkpoint=args.resume_from_checkpoint)
        hf.evaluate()  # the examples' evaluation after training: the same step again
    history = hf.state.log_history
    assert hf.state.global_step == 12
    assert list(stored(trial, "training")) == [4, 8, 12]
    assert list(stored(trial, "validation")) == [6, 12]
    # Step 12 holds the last "loss" log and the run's summary ("train_loss", "train_runtime").
    assert {"loss", "grad_norm", "learning_rate", "train_loss", "train_runtime"} <= set(
        stored(trial, "training")[12]
    )
    assert {"eval_loss", "eval_accuracy", "epochs"} <= set(stored(trial, "validation")[6])
    assert_every_logged_metric_stored(trial, history)

    checkpoints = list(Checkpoint.objects.filter(trial=trial).order_by("steps_completed"))
    assert [c.steps_completed for c in checkpoints] == [6, 12]
    for c in checkpoints:
        assert f"checkpoint-{c.steps_completed}/trainer_state.json" in c.resources
        assert f"checkpoint-{c.steps_completed}/my_data.json" in c.resources
        assert c.metadata["user_data"] == {"dataset": "parity"}
        assert c.metadata["trial_id"] == trial.id
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)
    trial.refresh_from_db()
    assert trial.state == State.COMPLETED
    assert trial.progress == pytest.approx(1.0)
    # The searcher metric (eval_loss, smaller is better) reached the registry.
    losses = [m["eval_loss"] for m in stored(trial, "validation").values()]
    assert trial.best_validation == pytest.approx(min(losses))


class PauseAt(transformers.TrainerCallback):
    """Pauses the experiment at ``step`` and waits until the trial process sees it (as when
    someone clicks pause in the dashboard during that step)."""

    def __init__(self, trial: Trial, step: int, ctx: core.Context) -> None:
        self.trial, self.step, self.ctx = trial, step, ctx

    def on_step_end(self, args, state, control, **kwargs) -> None:
        if state.global_step == self.step:
            lifecycle.experiment_pause(experiment_id=self.trial.experiment_id)
            wait_for(
                lambda: self.ctx.preempt.should_preempt(auto_ack=False), 30, "the pause signal"
            )


def test_pause_saves_and_stops_and_activate_resumes_from_that_checkpoint(
    trial: Trial, live_server, tmp_path: pathlib.Path, monkeypatch
) -> None:
    run_process(trial, live_server, tmp_path, monkeypatch)
    args = tiny_trainer.training_args(tmp_path / "out-1")
    with core.init(preempt_poll_interval=0.05) as ctx:
        callbacks = [PauseAt(trial, 5, ctx), HeadwayCallback(args, core_context=ctx)]
        first = tiny_trainer.trainer(args, callbacks)
        first.train(resume_from_checkpoint=args.resume_from_checkpoint)
    assert first.state.global_step == 5
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)
    trial.refresh_from_db()
    assert trial.state == State.PAUSED
    assert [c.steps_completed for c in Checkpoint.objects.filter(trial=trial)] == [5]

    lifecycle.experiment_activate(experiment_id=trial.experiment_id)
    trial.refresh_from_db()
    run_process(trial, live_server, tmp_path, monkeypatch)
    args = tiny_trainer.training_args(tmp_path / "out-2")  # a fresh working directory
    with core.init() as ctx:
        callback = DetCallback(ctx, args)
        assert args.resume_from_checkpoint == str(tmp_path / "out-2" / "checkpoint-5")
        second = tiny_trainer.trainer(args, [callback])
        second.train(resume_from_checkpoint=args.resume_from_checkpoint)
    assert second.state.global_step == 12
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)

    # Each step once: the first run's logs up to its checkpoint, then the second run's.
    assert list(stored(trial, "training")) == [4, 5, 8, 12]
    assert list(stored(trial, "validation")) == [6, 12]
    assert_every_logged_metric_stored(trial, first.state.log_history)
    resumed = [e for e in second.state.log_history if e["step"] > 5]
    assert_every_logged_metric_stored(trial, resumed)
    steps = [c.steps_completed for c in Checkpoint.objects.filter(trial=trial)]
    assert sorted(steps) == [5, 6, 12]
    trial.refresh_from_db()
    assert trial.state == State.COMPLETED


ASHA = """
name: hf-asha
entrypoint: python train.py
searcher: {name: adaptive_asha, metric: eval_loss, max_length: {batches: 12}, max_trials: 2,
           max_rungs: 2, divisor: 2, mode: standard}
"""


def test_searcher_operations_evaluate_at_each_rung(
    api, live_server, tmp_path: pathlib.Path, monkeypatch
) -> None:
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
    response = create_experiment(api, config=ASHA + f"checkpoint_storage: {json.dumps(storage)}\n")
    assert response.status_code == 201, response.json()
    trial = Trial.objects.filter(experiment_id=response.json()["id"]).order_by("id").first()
    assert trial is not None and trial.searcher_length == 6  # the first rung
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    monkeypatch.chdir(tmp_path)
    run_process(trial, live_server, tmp_path, monkeypatch)
    # No evaluation or save of its own: the searcher's rungs (6 and 12 batches) ask for them.
    args = tiny_trainer.training_args(tmp_path / "out", eval_steps=100, save_steps=100)
    with core.init() as ctx:
        callback = DetCallback(ctx, args)
        hf = tiny_trainer.trainer(args, [callback])
        hf.train()
    ended = hf.state.global_step
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)
    # The first rung's operation ended at 6 batches: evaluated there, eval_loss reported to the
    # searcher, which gave no further operation to a trial alone at its rung: saved and stopped
    # there, though --max_steps is 12.
    assert ended == 6
    assert list(stored(trial, "validation")) == [6]
    assert [c.steps_completed for c in Checkpoint.objects.filter(trial=trial)] == [6]
