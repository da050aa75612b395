"""Core API in local mode (no cluster info): the same calls work without a registry."""

from __future__ import annotations

import json
import pathlib

import pytest

from headway import core
from tests.helpers import REPO


@pytest.fixture(autouse=True)
def _local(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("HEADWAY_CLUSTER_INFO", raising=False)
    monkeypatch.chdir(tmp_path)


def test_checkpoints_round_trip_in_the_default_directory(tmp_path: pathlib.Path) -> None:
    with core.init() as ctx:
        assert ctx.info is None
        metadata = {"steps_completed": 30, "trial_id": -1, "extra": {"a": [1, 2]}}
        with ctx.checkpoint.store_path(metadata) as (path, storage_id):
            (path / "weights.bin").write_bytes(b"w" * 100)
        assert path == tmp_path / "checkpoints" / storage_id
        assert json.loads((path / "metadata.json").read_text()) == metadata
        assert ctx.checkpoint.get_metadata(storage_id) == metadata
        with ctx.checkpoint.restore_path(storage_id) as restored:
            assert (restored / "weights.bin").read_bytes() == b"w" * 100
        target = tmp_path / "copy"
        ctx.checkpoint.download(storage_id, target)
        assert (target / "weights.bin").read_bytes() == b"w" * 100
        ctx.checkpoint.delete(storage_id)
        with pytest.raises(FileNotFoundError):
            ctx.checkpoint.get_metadata(storage_id)


def test_upload_copies_a_directory_into_the_given_storage(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "src"
    (source / "nested").mkdir(parents=True)
    (source / "nested" / "f.txt").write_text("hello")
    with core.init(checkpoint_storage=str(tmp_path / "store")) as ctx:
        storage_id = ctx.checkpoint.upload(source, {"steps_completed": 5})
        assert ctx.checkpoint.storage_manager.list_files(storage_id) == {
            "nested/f.txt": 5,
            "metadata.json": (tmp_path / "store" / storage_id / "metadata.json").stat().st_size,
        }


def test_metrics_are_kept_in_memory_and_validated() -> None:
    with core.init() as ctx:
        ctx.train.report_training_metrics(10, {"loss": 0.5})
        ctx.train.report_validation_metrics(10, {"acc": float("nan")})
        ctx.train.report_metrics("inference", 10, {"latency_ms": 3})
        with pytest.raises(TypeError, match="metric 'bad' has a value of type set"):
            ctx.train.report_training_metrics(11, {"bad": {1, 2}})
        with pytest.raises(ValueError, match="metric group"):
            ctx.train.report_metrics("Bad Group", 11, {"x": 1})
        assert [r["metrics"] for r in ctx.train.reported_metrics("validation")] == [{"acc": "NaN"}]
        assert len(ctx.train.reported_metrics()) == 3
        assert ctx.train.get_experiment_best_validation() is None


def test_preempt_is_always_false_locally() -> None:
    with core.init() as ctx:
        assert ctx.preempt.should_preempt() is False
        assert ctx.preempt.mode is core.PreemptMode.WorkersAskChief


def test_searcher_yields_one_operation_of_the_given_length() -> None:
    with core.init(max_length={"epochs": 3}) as ctx:
        assert ctx.searcher.get_configured_units() is core.Unit.EPOCHS
        lengths = []
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            for epoch in range(op.length):
                op.report_progress(epoch)
            op.report_completed(0.1)
        assert lengths == [3]


def test_bad_max_length_names_the_argument() -> None:
    with pytest.raises(ValueError, match="max_length"):
        core.init(max_length={"steps": 3})


def test_single_distributed_context_collectives_are_trivial() -> None:
    dist = core.DistributedContext.single()
    assert dist.broadcast(5) == 5
    assert dist.allgather("a") == ["a"]
    assert dist.gather(1) == [1]
    assert dist.broadcast_local("x") == "x"
    assert (dist.get_rank(), dist.get_size(), dist.local_rank, dist.cross_size) == (0, 1, 0, 1)


def test_distributed_context_validates_ranks() -> None:
    with pytest.raises(ValueError, match="rank=2"):
        core.DistributedContext(
            rank=2, size=2, local_rank=0, local_size=2, cross_rank=0, cross_size=1
        )


def test_from_torch_distributed_names_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var, value in {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("GROUP_RANK", raising=False)
    with pytest.raises(RuntimeError, match="GROUP_RANK"):
        core.DistributedContext.from_torch_distributed()
    monkeypatch.setenv("GROUP_RANK", "1")
    dist = core.DistributedContext.from_torch_distributed()
    assert (dist.rank, dist.size, dist.local_rank, dist.local_size) == (3, 4, 1, 2)
    assert (dist.cross_rank, dist.cross_size) == (1, 2)


def test_non_chief_cannot_store_without_shard(tmp_path: pathlib.Path) -> None:
    dist = core.DistributedContext(
        rank=1, size=2, local_rank=1, local_size=2, cross_rank=0, cross_size=1
    )
    ctx = core.init(distributed=dist, checkpoint_storage=str(tmp_path))
    with (
        pytest.raises(RuntimeError, match="chief"),
        ctx.checkpoint.store_path({"steps_completed": 1}),
    ):
        pass
    ctx.train.report_training_metrics(1, {"loss": 1.0})  # ignored on non-chief ranks
    assert ctx.train.reported_metrics() == []
    ctx.close()


def test_import_stays_light() -> None:
    import subprocess
    import sys

    code = "import sys, headway.core; print(sorted({'torch','numpy','boto3'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert out.stdout.strip() == "[]"
