"""A Lightning trial paused mid-training checkpoints and stops; activated again, it resumes
from that checkpoint (latest_checkpoint_path) and continues at its steps_completed."""

from __future__ import annotations

import logging
import pathlib

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from headway import core
from headway.lightning import HeadwayCallback, HeadwayLogger, latest_checkpoint_path
from registry import lifecycle
from registry.models import Checkpoint, MetricReport, Trial
from tests.headway.lightning._tiny import TinyRegression, loaders, trainer_kwargs
from tests.helpers import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


class PauseAt(Callback):
    """Pause the trial through the lifecycle (what the dashboard's button does) after batch
    ``step`` and wait until the preemption watcher has seen it."""

    def __init__(self, step: int, trial_id: int, core_context: core.Context) -> None:
        self.step, self.trial_id, self.core = step, trial_id, core_context

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            lifecycle.trial_pause(trial_id=self.trial_id)
            wait_for(lambda: self.core.preempt.should_preempt(auto_ack=False), 30, "the pause")


def fit(
    root: pathlib.Path, callbacks: list, ckpt_path: str | None, ctx: core.Context
) -> pl.Trainer:
    train, val = loaders(batches=4)
    trainer = pl.Trainer(
        max_epochs=2,
        logger=HeadwayLogger(ctx),
        callbacks=[*callbacks, HeadwayCallback(ctx), ModelCheckpoint(dirpath=root / "ckpt")],
        **trainer_kwargs(root),
    )
    trainer.fit(TinyRegression(), train, val, ckpt_path=ckpt_path)
    return trainer


def test_pause_checkpoints_and_stops_then_resume_continues(
    managed_trial, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    trial, _ = managed_trial()
    with core.init(preempt_poll_interval=0.05) as ctx:
        assert latest_checkpoint_path(ctx) is None  # a new trial
        first = fit(tmp_path / "run1", [PauseAt(3, trial.id, ctx)], None, ctx)
    assert first.global_step == 3  # stopped after the batch it was asked at
    preempted = Checkpoint.objects.get(trial=trial, metadata__lightning__preempted=True)
    assert preempted.steps_completed == 3
    assert preempted.metadata["lightning"] == {"file": "preempted.ckpt", "preempted": True}
    trial.refresh_from_db()
    assert str(trial.latest_checkpoint) == str(preempted.uuid)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=trial.run_id, exit_code=0)
    assert Trial.objects.get(id=trial.id).state == "PAUSED"

    lifecycle.trial_activate(trial_id=trial.id)
    trial, _ = managed_trial(Trial.objects.get(id=trial.id))
    caplog.set_level(logging.INFO, logger="headway.lightning")
    with core.init() as ctx:
        path = latest_checkpoint_path(ctx, tmp_path / "restore")
        assert path == str(tmp_path / "restore" / "preempted.ckpt")
        second = fit(tmp_path / "run2", [], path, ctx)
    assert second.global_step == 8  # continued from 3, not from 0
    # The logs say which checkpoint was restored and where the Trainer continued.
    assert f"restoring checkpoint {preempted.uuid} at step 3: {path}" in caplog.messages
    assert f"rank 0 resumes at step 3 (epoch 0) from {path}" in caplog.messages

    steps = {}
    for report in MetricReport.objects.filter(trial=trial, group="training"):
        if "train_loss_step" in report.metrics:
            steps[report.steps_completed] = report.run_id
    assert steps == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2}
    validation = MetricReport.objects.filter(trial=trial, group="validation")
    # Lightning validates and ModelCheckpoint saves as the stopped epoch ends (step 3), then
    # at the ends of the resumed epochs.
    assert sorted(validation.values_list("steps_completed", flat=True)) == [3, 4, 8]
    stored = Checkpoint.objects.filter(trial=trial).values_list("steps_completed", flat=True)
    assert sorted(stored) == [3, 3, 4, 8]
