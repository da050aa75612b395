"""The TensorBoard writer thread writes at most once per ``WRITE_INTERVAL_S``: many
reports in a burst are all written, in order, once ``drain()`` (a checkpoint) or the context's
close asks; nothing is lost or written twice."""

from __future__ import annotations

import pathlib

from headway import core
from headway.core import _tensorboard
from tests.headway.core.test_core_managed import FakeRegistry, managed, registry  # noqa: F401 - fixtures
from tests.headway.core.test_core_train_progress import _scalars


def test_a_burst_of_reports_is_written_once_each_in_order(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
    monkeypatch,
) -> None:
    # An interval no test run reaches: only drain() and close() can make the thread write.
    monkeypatch.setattr(_tensorboard, "WRITE_INTERVAL_S", 3600.0)
    with core.init() as ctx:
        folder = ctx.train.get_tensorboard_path()
        for step in range(1, 51):
            ctx.train.report_training_metrics(step, {"loss": step / 100})
        ctx.train._tensorboard.drain()
        assert _scalars(folder) == {"Headway/loss": [(s, s / 100) for s in range(1, 51)]}
        ctx.train.report_training_metrics(51, {"loss": 0.51})
        ctx.train.report_validation_metrics(51, {"loss": 0.4})
    assert _scalars(folder) == {
        "Headway/loss": [(s, s / 100) for s in range(1, 52)],
        "Headway/val_loss": [(51, 0.4)],
    }


def test_each_step_is_one_event_holding_every_metric_of_that_step(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    # Four batches ending at step 4: batch i is written at step i (0..3).
    batches = [{"loss": 1.0 / (i + 1), "accuracy": i / 10} for i in range(4)]
    with core.init() as ctx:
        folder = ctx.train.get_tensorboard_path()
        ctx.train.report_training_metrics(4, {"loss": 0.5, "lr": 0.1}, batch_metrics=batches)
    assert _scalars(folder) == {
        "Headway/loss": [(i, 1.0 / (i + 1)) for i in range(4)],
        "Headway/accuracy": [(i, i / 10) for i in range(4)],
        "Headway/lr": [(4, 0.1)],  # the average of a name no batch reported, at the report's step
    }
    (events,) = folder.glob("events.out.tfevents.*")
    steps = [e.step for e in EventFileLoader(str(events)).Load() if e.HasField("summary")]
    assert steps == [0, 1, 2, 3, 4]  # one record a step, not one a metric
