"""Automatic TensorBoard logging of the PyTorch harness: reported metrics
written as tfevents and stored with checkpoints, ``pytorch.init(enable_tensorboard_logging=)``
and ``context.get/set_enable_tensorboard_logging()`` (Determined's switch)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from headway import pytorch
from headway.pytorch import Batch
from tests.headway.pytorch.test_pytorch_fidelity_extras import _event_scalars, model_def  # noqa: F401 - fixture

HPARAMS = {"global_batch_size": 8, "lr": 0.1}


def _fit(tmp_path: pathlib.Path, trial_cls: Any, **init: Any) -> tuple[Any, pathlib.Path]:
    with pytorch.init(hparams=HPARAMS, checkpoint_storage=str(tmp_path / "ckpts"), **init) as ctx:
        trial = trial_cls(ctx, tb=False)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(
            max_length=Batch(4),
            checkpoint_period=Batch(2),
            validation_period=Batch(2),
            reporting_period=Batch(1),
        )
        reported = {
            group: [r["steps_completed"] for r in ctx._core.train.reported_metrics(group)]
            for group in ("training", "validation")
        }
    trial.reported = reported
    return trial, tmp_path / "ckpts" / str(trainer.latest_checkpoint)


def test_reported_metrics_are_written_and_stored_with_checkpoints(
    tmp_path: pathlib.Path,
    model_def: Any,  # noqa: F811
) -> None:
    trial, checkpoint = _fit(tmp_path, model_def.TinyTrial)
    assert trial.context.get_enable_tensorboard_logging() is True
    stored = checkpoint / "tensorboard"
    # One event per report (written at report time), each report before the checkpoint in it.
    losses = _event_scalars(stored, "Headway/loss")
    assert trial.reported["training"] == [1, 2, 3, 4]
    assert len(losses) == 4
    assert len(_event_scalars(stored, "Headway/val_loss")) == len(trial.reported["validation"])
    # The folder the trial sees is the one stored.
    assert _event_scalars(trial.context.get_tensorboard_path(), "Headway/loss") == losses


def test_disabled_logging_writes_and_stores_nothing(
    tmp_path: pathlib.Path,
    model_def: Any,  # noqa: F811
) -> None:
    trial, checkpoint = _fit(tmp_path, model_def.TinyTrial, enable_tensorboard_logging=False)
    assert trial.context.get_enable_tensorboard_logging() is False
    assert _event_scalars(trial.context.get_tensorboard_path(), "Headway/loss") == []
    assert not (checkpoint / "tensorboard").exists()
    assert (checkpoint / "state-dict.pth").exists()


def test_the_switch_takes_bools_only_and_can_turn_logging_back_on(
    tmp_path: pathlib.Path,
    model_def: Any,  # noqa: F811
) -> None:
    with pytorch.init(
        hparams=HPARAMS,
        checkpoint_storage=str(tmp_path / "ckpts"),
        enable_tensorboard_logging=False,
    ) as ctx:
        with pytest.raises(TypeError, match="bool"):
            ctx.set_enable_tensorboard_logging("yes")  # type: ignore[arg-type]
        ctx.set_enable_tensorboard_logging(True)
        assert ctx.get_enable_tensorboard_logging() is True
        trainer = pytorch.Trainer(model_def.TinyTrial(ctx, tb=False), ctx)
        trainer.fit(max_length=Batch(2), checkpoint_period=Batch(2), reporting_period=Batch(1))
    checkpoint = tmp_path / "ckpts" / str(trainer.latest_checkpoint)
    assert _event_scalars(checkpoint / "tensorboard", "Headway/loss") != []


def test_deepspeed_init_takes_the_switch_too(tmp_path: pathlib.Path) -> None:
    hw_ds = pytest.importorskip("headway.pytorch.deepspeed")
    with hw_ds.init(checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.get_enable_tensorboard_logging() is True
    with hw_ds.init(checkpoint_storage=str(tmp_path), enable_tensorboard_logging=False) as ctx:
        assert ctx.get_enable_tensorboard_logging() is False
