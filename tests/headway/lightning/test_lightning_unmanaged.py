"""HeadwayLogger() given no Core API context starts its own run through core_v2: an unmanaged
trial of the live registry, with Lightning's hparams as the trial's, ended by finalize."""

from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint

from headway import core
from headway.client import RegistryAPI
from headway.experimental import core_v2
from headway.lightning import DetLogger, HeadwayLogger
from registry.models import Checkpoint, MetricReport, Trial
from tests.headway.lightning._tiny import TinyRegression, loaders, trainer_kwargs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def client(unmanaged_client: RegistryAPI) -> RegistryAPI:
    """A user's client of the live registry (``unmanaged_client``)."""
    return unmanaged_client


def fit(logger: HeadwayLogger, root: pathlib.Path, model: pl.LightningModule) -> None:
    train, val = loaders(batches=2)
    trainer = pl.Trainer(
        max_epochs=1,
        logger=logger,
        callbacks=[ModelCheckpoint(dirpath=root / "ckpt", monitor="val_loss")],
        **trainer_kwargs(root),
    )
    trainer.fit(model, train, val)


def test_a_logger_without_context_reports_an_unmanaged_run(client, tmp_path) -> None:
    config = core_v2.Config(name="lightning-run", external_experiment_id="e", external_trial_id="t")
    headway_logger = HeadwayLogger(config=config, client=client)
    assert headway_logger.version == "local"  # nothing started before the first report
    fit(headway_logger, tmp_path, TinyRegression(lr=0.2, width=4))

    trial = Trial.objects.select_related("experiment").get()
    assert trial.experiment.unmanaged and trial.experiment.name == "lightning-run"
    assert trial.state == "COMPLETED"  # finalize ended the run
    assert trial.hparams == {"lr": 0.2, "width": 4}  # Lightning's, the config giving none
    steps = MetricReport.objects.filter(trial=trial, group="training").values_list(
        "steps_completed", flat=True
    )
    assert sorted(steps) == [1, 2]
    checkpoint = Checkpoint.objects.get(trial=trial)
    assert checkpoint.steps_completed == 2
    assert checkpoint.metadata["lightning"]["monitor"] == "val_loss"

    # The same external ids again: the same trial continues, its hparams kept.
    fit(HeadwayLogger(config=config, client=client), tmp_path / "again", TinyRegression(lr=0.5))
    trial.refresh_from_db()
    assert Trial.objects.count() == 1 and trial.hparams == {"lr": 0.2, "width": 4}
    assert trial.state == "COMPLETED" and Checkpoint.objects.filter(trial=trial).count() == 2


def test_a_failed_fit_ends_the_run_error(client, tmp_path) -> None:
    class Broken(TinyRegression):
        def training_step(self, batch, batch_idx):
            if batch_idx == 1:  # after the first batch's report started the run
                raise RuntimeError("boom")
            return super().training_step(batch, batch_idx)

    with pytest.raises(RuntimeError, match="boom"):
        fit(HeadwayLogger(client=client), tmp_path, Broken())
    trial = Trial.objects.get()
    assert trial.state == "ERROR"
    steps = MetricReport.objects.filter(trial=trial).values_list("steps_completed", flat=True)
    assert list(steps) == [1]


def test_config_with_a_context_is_refused(client, tmp_path) -> None:
    with core.init(checkpoint_storage=str(tmp_path)) as ctx:
        with pytest.raises(ValueError, match="config and client"):
            HeadwayLogger(ctx, config=core_v2.Config())
        with pytest.raises(ValueError, match="config and client"):
            HeadwayLogger(ctx, client=client)


def test_det_logger_reports_into_a_core_v2_context(client, tmp_path) -> None:
    config = core_v2.Config(name="det-logger", external_experiment_id="e", external_trial_id="t")
    with core_v2.init_context(config=config, client=client) as ctx:
        fit(DetLogger(ctx), tmp_path, TinyRegression(lr=0.2, width=4))
        trial = Trial.objects.get()
        assert trial.state == "ACTIVE"  # the logger does not end a run it did not start
    trial.refresh_from_db()
    assert trial.state == "COMPLETED" and trial.experiment.name == "det-logger"
    steps = MetricReport.objects.filter(trial=trial, group="training").values_list(
        "steps_completed", flat=True
    )
    assert sorted(steps) == [1, 2]
    assert Checkpoint.objects.get(trial=trial).steps_completed == 2
