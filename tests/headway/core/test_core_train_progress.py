"""Core API 0.38 names on ``core_context.train``: ``report_progress``,
``report_early_exit``, ``get_tensorboard_path``, ``upload_tensorboard_files`` and the
``TensorboardMode`` of ``core.init``."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from headway import core
from headway.client import Session
from headway.core import _searcher
from headway.core._metrics import LocalMetricSink
from headway.core._searcher import RegistrySearcherReporter
from headway.core._train import TrainContext
from tests.headway.core.test_core_managed import FakeRegistry, managed, registry  # noqa: F401 - fixtures

PROGRESS = "/api/v1/trials/3/progress/"


def _scalars(folder: pathlib.Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series in the event files under ``folder``: tag -> [(step, value)]."""
    found: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            found.setdefault(tag, []).extend(
                (e.step, pytest.approx(e.value)) for e in accumulator.Scalars(tag)
            )
    return found


# -- report_progress ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-0.01, 1.5, float("nan"), "half", None, True])
def test_report_progress_refuses_values_outside_0_1(bad: Any) -> None:
    with core.init() as ctx, pytest.raises(ValueError, match="progress"):
        ctx.train.report_progress(bad)


def test_report_progress_is_sent_as_the_trials_progress(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, _ = managed
    with core.init() as ctx:
        ctx.train.report_progress(0.25)
        ctx.train.report_progress(0.3)  # within a second: dropped
        ctx.train.report_progress(1.0)  # the end is always sent
        monkeypatch.setattr(_searcher, "PROGRESS_MIN_INTERVAL_S", 0.0)
    assert fake.posts(PROGRESS) == [{"progress": 0.25}, {"progress": 1.0}]


def test_report_progress_on_other_ranks_checks_and_sends_nothing(
    registry: tuple[FakeRegistry, str],  # noqa: F811
) -> None:
    fake, url = registry
    rank1 = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1
    )
    train = TrainContext(
        sink=LocalMetricSink(),
        distributed=rank1,
        reporter=RegistrySearcherReporter(Session(url, "trial-token"), 3),
    )
    train.report_progress(0.5)
    train.report_early_exit(core.EarlyExitReason.INVALID_HP)
    with pytest.raises(ValueError):
        train.report_progress(2)
    assert fake.requests == []


def test_a_failed_progress_report_does_not_stop_training(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    fake, _ = managed
    fake.scripts[("POST", PROGRESS)] = [(500, {"detail": "down"})]
    with core.init() as ctx:
        ctx.train.report_progress(0.5)  # logged, not raised
        ctx.train.report_training_metrics(1, {"loss": 1.0})


# -- report_early_exit ----------------------------------------------------------------------------


def test_report_early_exit_tells_the_searcher(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    fake, _ = managed
    with core.init() as ctx:
        ctx.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
        with pytest.raises(ValueError):
            ctx.train.report_early_exit("not-a-reason")  # type: ignore[arg-type]
    assert fake.posts("/api/v1/trials/3/searcher/early_exit/") == [{"reason": "invalid_hp"}]


# -- TensorBoard ----------------------------------------------------------------------------------


def test_auto_mode_writes_reported_metrics_and_stores_them_with_checkpoints(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    _, storage = managed
    with core.init() as ctx:
        path = ctx.train.get_tensorboard_path()
        assert path.name == "tensorboard-rank0" and path.is_dir()
        ctx.train.report_training_metrics(
            4, {"loss": 0.5, "note": "text"}, batch_metrics=[{"loss": 0.9}, {"loss": 0.7}]
        )
        ctx.train.report_validation_metrics(4, {"accuracy": 0.8, "val_loss": 0.4})
        ctx.train.report_metrics("inference", 4, {"latency": 3.0})  # not a TensorBoard group
        with ctx.checkpoint.store_path({"steps_completed": 4}) as (ckpt, storage_id):
            (ckpt / "w").write_bytes(b"1")
    stored = storage / storage_id / "tensorboard"
    assert _scalars(stored) == {
        # Per-batch values at their own batch; the average only for names not in them.
        "Headway/loss": [(2, 0.9), (3, 0.7)],
        "Headway/val_accuracy": [(4, 0.8)],
        "Headway/val_loss": [(4, 0.4)],
    }


def test_manual_mode_stores_only_uploaded_files_with_mangled_names(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    _, storage = managed
    with core.init(tensorboard_mode=core.TensorboardMode.MANUAL) as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})  # MANUAL: not written
        folder = ctx.train.get_tensorboard_path()
        (folder / "keep.txt").write_text("k")
        (folder / "skip.log").write_text("s")
        ctx.train.upload_tensorboard_files(
            selector=lambda p: p.suffix == ".txt",
            mangler=lambda p, rank: pathlib.Path(f"rank{rank}") / p,
        )
        (folder / "late.txt").write_text("not uploaded")
        with pytest.raises(ValueError, match="mangler"):
            ctx.train.upload_tensorboard_files(mangler=lambda p, rank: pathlib.Path("/abs") / p)
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (_, storage_id):
            pass
    stored = storage / storage_id / "tensorboard"
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*") if p.is_file()) == [
        "rank0/keep.txt"
    ]


def test_auto_mode_refuses_upload_tensorboard_files() -> None:
    with core.init() as ctx, pytest.raises(RuntimeError, match="MANUAL"):
        ctx.train.upload_tensorboard_files()


def test_local_mode_writes_no_tensorboard_files(tmp_path: pathlib.Path) -> None:
    """As Determined's local mode (DummyTrainContext): the path exists, nothing is written."""
    with core.init(checkpoint_storage=str(tmp_path / "c")) as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
        folder = ctx.train.get_tensorboard_path()
        with ctx.checkpoint.store_path({"steps_completed": 1}) as (_, storage_id):
            pass
    assert list(folder.iterdir()) == []
    assert not (tmp_path / "c" / storage_id / "tensorboard").exists()


def test_a_bad_tensorboard_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="TensorboardMode"):
        core.init(tensorboard_mode="SOMETIMES")  # type: ignore[arg-type]


def test_closing_the_context_ends_the_writer_thread_with_its_events_written(
    managed: tuple[FakeRegistry, pathlib.Path],  # noqa: F811
) -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 0.25})
        folder = ctx.train.get_tensorboard_path()
        thread = ctx.train._tensorboard._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive()
    assert _scalars(folder) == {"Headway/loss": [(1, 0.25)]}
