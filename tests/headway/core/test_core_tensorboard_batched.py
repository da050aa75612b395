"""The TensorBoard writer thread writes at most once per ``WRITE_INTERVAL_S`` (issue #27): many
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
