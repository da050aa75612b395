"""HeadwayLogger in a real Lightning Trainer (CPU) reporting into a managed trial of the live
registry: metric groups, names and steps, hparams, ModelCheckpoint files as checkpoints."""

from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger

from headway import core
from headway.lightning import DetLogger, HeadwayLogger
from registry.models import Checkpoint, MetricReport
from tests.headway.lightning._tiny import TinyRegression, loaders, trainer_kwargs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def series(trial, group: str) -> dict[str, dict[int, float]]:
    """name -> {steps_completed: value} of the trial's stored reports of ``group``."""
    out: dict[str, dict[int, float]] = {}
    for report in MetricReport.objects.filter(trial=trial, group=group):
        for name, value in report.metrics.items():
            out.setdefault(name, {})[report.steps_completed] = value
    return out


def test_metrics_hparams_and_checkpoints_reach_the_trial(managed_trial, tmp_path: pathlib.Path):
    trial, _ = managed_trial()
    train, val = loaders(batches=4)
    checkpoints = ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_loss", save_top_k=-1)
    with core.init() as ctx:
        headway_logger = HeadwayLogger(ctx)
        trainer = pl.Trainer(
            max_epochs=2, logger=headway_logger, callbacks=[checkpoints], **trainer_kwargs(tmp_path)
        )
        trainer.fit(TinyRegression(lr=0.05, width=4), train, val)
    assert headway_logger.name == f"experiment-{trial.experiment_id}"
    assert headway_logger.version == f"trial-{trial.id}"

    training = series(trial, "training")
    assert sorted(training) == ["train_loss_epoch", "train_loss_step"]
    assert sorted(training["train_loss_step"]) == list(range(1, 9))  # 2 epochs x 4 batches
    # Lightning logs the epoch's aggregate at the epoch's last step.
    assert sorted(training["train_loss_epoch"]) == [4, 8]
    validation = series(trial, "validation")
    assert sorted(validation) == ["val_loss"]
    assert sorted(validation["val_loss"]) == [4, 8]
    epochs = dict(
        MetricReport.objects.filter(trial=trial, group="validation").values_list(
            "steps_completed", "epoch"
        )
    )
    assert epochs == {4: 0.0, 8: 1.0}
    assert (
        not MetricReport.objects.filter(trial=trial)
        .exclude(group__in=["training", "validation", "system"])
        .exists()
    )

    stored = {c.steps_completed: c for c in Checkpoint.objects.filter(trial=trial)}
    assert sorted(stored) == [4, 8]
    for step, checkpoint in stored.items():
        entry = checkpoint.metadata["lightning"]
        assert checkpoint.metadata["steps_completed"] == step
        assert entry["file"] == f"epoch={step // 4 - 1}-step={step}.ckpt"
        assert entry["monitor"] == "val_loss" and entry["mode"] == "min"
        assert entry["score"] == pytest.approx(validation["val_loss"][step])
        assert entry["hparams"] == {"lr": 0.05, "width": 4}
        assert list(checkpoint.resources) == [entry["file"], "metadata.json"] or set(
            checkpoint.resources
        ) >= {entry["file"], "metadata.json"}
    assert sorted(headway_logger.registered_checkpoints) == sorted(
        str(tmp_path / "ckpt" / c.metadata["lightning"]["file"]) for c in stored.values()
    )
    assert headway_logger.hparams == {"lr": 0.05, "width": 4}


def test_log_model_false_registers_no_checkpoint(managed_trial, tmp_path: pathlib.Path):
    trial, _ = managed_trial()
    train, val = loaders(batches=2)
    with core.init() as ctx:
        trainer = pl.Trainer(
            max_epochs=1,
            logger=HeadwayLogger(ctx, log_model=False),
            callbacks=[ModelCheckpoint(dirpath=tmp_path / "ckpt")],
            **trainer_kwargs(tmp_path),
        )
        trainer.fit(TinyRegression(), train, val)
    assert (tmp_path / "ckpt").is_dir() and any((tmp_path / "ckpt").iterdir())
    assert not Checkpoint.objects.filter(trial=trial).exists()
    assert sorted(series(trial, "training")["train_loss_step"]) == [1, 2]


def test_a_context_is_required() -> None:
    with pytest.raises(TypeError, match=r"headway\.core\.Context"):
        HeadwayLogger({"not": "a context"})  # type: ignore[arg-type]


def test_det_logger_reports_into_the_contexts_trial(managed_trial, tmp_path: pathlib.Path):
    trial, _ = managed_trial()
    train, val = loaders(batches=2)
    with core.init() as ctx:
        det_logger = DetLogger(ctx)
        assert isinstance(det_logger, Logger) and det_logger.experiment is ctx
        trainer = pl.Trainer(
            max_epochs=1,
            logger=det_logger,
            callbacks=[ModelCheckpoint(dirpath=tmp_path / "ckpt", monitor="val_loss")],
            **trainer_kwargs(tmp_path),
        )
        trainer.fit(TinyRegression(lr=0.05, width=4), train, val)
    assert det_logger.version == f"trial-{trial.id}"
    assert sorted(series(trial, "training")["train_loss_step"]) == [1, 2]
    assert sorted(series(trial, "validation")["val_loss"]) == [2]
    checkpoint = Checkpoint.objects.get(trial=trial)
    assert checkpoint.steps_completed == 2
    assert checkpoint.metadata["lightning"]["hparams"] == {"lr": 0.05, "width": 4}


@pytest.mark.parametrize("argument", [None, {"not": "a context"}])
def test_det_logger_needs_a_context(argument) -> None:
    with pytest.raises(TypeError, match=r"DetLogger\(core_context\).*headway\.core\.Context"):
        DetLogger(argument)
