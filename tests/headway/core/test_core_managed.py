"""Core API in managed mode against a small real HTTP registry (no mocks of our Session)."""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
import torch

from headway import core
from headway.client import BadRequestError
from headway.core import _metrics
from tests.helpers import REPO, answer_json, wait_for


class FakeRegistry:
    """Records every request; answers from per-path scripts, else a sensible default."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.scripts: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        self.should_preempt = False
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def posts(self, path: str) -> list[Any]:
        with self.lock:
            return [r["json"] for r in self.requests if r["method"] == "POST" and r["path"] == path]

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        with self.lock:
            script = self.scripts.get((method, path))
            if script:
                return script.pop(0)
        if path.endswith("/preempt/"):
            return 200, {"should_preempt": self.should_preempt}
        if method == "POST" and path.endswith("/checkpoints/"):
            # The registry's answer to Prefer: return=minimal (wire.CheckpointRegistered); its
            # checkpoint row (GET checkpoints/{uuid}/) has these fields too.
            trial_id = int(path.split("/")[4])
            registered = {"trial_id": trial_id, "state": "COMPLETED", **body}
            self.checkpoints[body["uuid"]] = registered
            return 201, registered
        if method == "GET" and path.startswith("/api/v1/checkpoints/"):
            uuid = path.split("/")[4]
            if uuid in self.checkpoints:
                return 200, self.checkpoints[uuid]
            return 404, {"detail": "not found"}
        if path.endswith("/metrics/"):
            return 200, {"accepted": len(body["reports"])}
        # The registry's answers (headway.client.wire) to the other Core API reports.
        if path.endswith("/preempt/ack/"):
            return 200, {"acknowledged": True}
        if path.endswith("/progress/"):
            return 200, {"progress": body["progress"]}
        if path.endswith("/searcher/completed/"):
            return 200, {"recorded": True, "next_length": None}
        if path.endswith("/searcher/early_exit/"):
            return 200, {"early_exit": body["reason"]}
        return 200, {}


def _handler(registry: FakeRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            with registry.lock:
                registry.requests.append(
                    {
                        "method": method,
                        "path": url.path,
                        "query": dict(urllib.parse.parse_qsl(url.query)),
                        "json": body,
                        "raw": raw,
                        "auth": self.headers.get("Authorization"),
                    }
                )
            status, answer = registry.answer(method, url.path, body)
            answer_json(self, answer, status)

        def do_GET(self) -> None:  # http.server's naming
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def registry() -> Iterator[tuple[FakeRegistry, str]]:
    fake = FakeRegistry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def managed(
    registry: tuple[FakeRegistry, str], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[FakeRegistry, pathlib.Path]:
    fake, url = registry
    storage = tmp_path / "storage"
    info = {
        "master_url": url,
        "token": "trial-token",
        "experiment_id": 1,
        "trial_id": 3,
        "run_id": 2,
        "hparams": {"lr": 0.1},
        "trial_seed": 7,
        "latest_checkpoint": None,
        "experiment_config": {
            "entrypoint": "python train.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 500}},
            "checkpoint_storage": {
                "type": "shared_fs",
                "host_path": str(storage),
                "storage_path": "sub",
            },
        },
    }
    path = tmp_path / "cluster-info.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    monkeypatch.setattr(_metrics, "RETRY_BACKOFF_S", 0.01)
    return fake, storage / "sub"


def test_metrics_are_batched_in_order_and_delivered_at_exit(managed: Any) -> None:
    fake, _ = managed
    with core.init() as ctx:
        assert ctx.info is not None and ctx.info.trial.trial_id == 3
        for step in range(2500):
            ctx.train.report_training_metrics(step, {"loss": 1.0 / (step + 1)})
        ctx.train.report_validation_metrics(2500, {"acc": 0.5})
    batches = fake.posts("/api/v1/trials/3/metrics/")
    reports = [r for batch in batches for r in batch["reports"]]
    assert len(batches) <= 10  # batched, not one POST per report
    assert [r["steps_completed"] for r in reports] == [*range(2500), 2500]
    assert reports[0]["group"] == "training" and reports[-1]["group"] == "validation"
    assert reports[0]["run_id"] == 2 and reports[0]["timestamp"].endswith("Z")
    assert reports[-1]["metrics"] == {"acc": 0.5}
    assert all(r["auth"] == "Token trial-token" for r in fake.requests)


def test_metrics_are_retried_after_503_without_loss_or_duplicates(managed: Any) -> None:
    fake, _ = managed
    path = "/api/v1/trials/3/metrics/"
    fake.scripts[("POST", path)] = [(503, {"detail": "busy"}), (503, {"detail": "busy"})]
    with core.init() as ctx:
        for step in range(5):
            ctx.train.report_training_metrics(step, {"loss": float(step)})
    bodies = fake.posts(path)
    assert len(bodies) >= 3  # two refused attempts, then delivery
    assert bodies[0] == bodies[1] == bodies[2]
    delivered = [r for body in bodies[2:] for r in body["reports"]]
    assert [r["steps_completed"] for r in delivered] == [0, 1, 2, 3, 4]


def test_values_are_converted_and_non_finite_sent_as_strings(managed: Any) -> None:
    fake, _ = managed
    with core.init() as ctx:
        ctx.train.report_training_metrics(
            10,
            {
                "nan": float("nan"),
                "inf": math.inf,
                "ninf": -math.inf,
                "np": np.float32(0.5),
                "tensor": torch.tensor(2.0),
                "flag": True,
                "name": "adam",
                "hist": [1, np.int64(2), {"x": torch.tensor(float("inf"))}],
            },
        )
    (body,) = fake.posts("/api/v1/trials/3/metrics/")
    raw = next(r["raw"] for r in fake.requests if r["path"].endswith("/metrics/"))
    assert b"NaN" not in raw.replace(b'"NaN"', b"")  # no bare NaN literal on the wire
    assert body["reports"][0]["metrics"] == {
        "nan": "NaN",
        "inf": "Infinity",
        "ninf": "-Infinity",
        "np": 0.5,
        "tensor": 2.0,
        "flag": True,
        "name": "adam",
        "hist": [1, 2, {"x": "Infinity"}],
    }


def test_non_serializable_value_raises_type_error_naming_the_key(managed: Any) -> None:
    fake, _ = managed
    with core.init() as ctx:
        with pytest.raises(TypeError, match="metric 'foo' has a value of type object"):
            ctx.train.report_training_metrics(1, {"ok": 1.0, "foo": object()})
        with pytest.raises(ValueError, match="steps_completed"):
            ctx.train.report_training_metrics(-1, {"ok": 1.0})
    assert fake.posts("/api/v1/trials/3/metrics/") == []


def test_a_rejected_batch_is_raised_at_exit(managed: Any) -> None:
    fake, _ = managed
    fake.scripts[("POST", "/api/v1/trials/3/metrics/")] = [
        (400, {"detail": "bad", "errors": {"reports[0].group": ["no"]}})
    ]
    with pytest.raises(BadRequestError, match=r"reports\[0\].group"), core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})


def test_a_rejected_batch_is_raised_by_the_next_report(managed: Any) -> None:
    fake, _ = managed
    fake.scripts[("POST", "/api/v1/trials/3/metrics/")] = [(400, {"detail": "bad report"})]
    with core.init() as ctx:
        ctx.train.report_training_metrics(1, {"loss": 1.0})
        ctx.train.flush()
        with pytest.raises(BadRequestError, match="bad report"):
            ctx.train.report_training_metrics(2, {"loss": 1.0})
        ctx.train.report_training_metrics(3, {"loss": 1.0})  # raised once; later reports go on
    delivered = [
        r["steps_completed"]
        for b in fake.posts("/api/v1/trials/3/metrics/")[1:]
        for r in b["reports"]
    ]
    assert delivered == [3]


def test_metrics_reported_without_closing_are_delivered_at_interpreter_exit(
    managed: Any,
) -> None:
    fake, _ = managed
    code = (
        "from headway import core\n"
        "ctx = core.init()\n"
        "ctx.train.report_training_metrics(42, {'loss': 0.5})\n"
    )
    root = REPO
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    (body,) = fake.posts("/api/v1/trials/3/metrics/")
    assert body["reports"][0]["steps_completed"] == 42


def test_checkpoint_is_registered_with_resources_after_the_files(managed: Any) -> None:
    fake, storage = managed
    with core.init() as ctx:
        with ctx.checkpoint.store_path({"steps_completed": 400, "note": "x"}) as (path, sid):
            assert path == storage / sid
            (path / "state.pt").write_bytes(b"0123456789")
            (path / "code").mkdir()
            (path / "code" / "model.py").write_bytes(b"abc")
            assert fake.posts("/api/v1/trials/3/checkpoints/") == []
        assert ctx.checkpoint.get_metadata(sid) == {"steps_completed": 400, "note": "x"}
        with ctx.checkpoint.restore_path(sid) as restored:
            assert (restored / "state.pt").read_bytes() == b"0123456789"
    (body,) = fake.posts("/api/v1/trials/3/checkpoints/")
    metadata_size = (storage / sid / "metadata.json").stat().st_size
    assert body == {
        "uuid": sid,
        "steps_completed": 400,
        "run_id": 2,
        "resources": {"state.pt": 10, "code/model.py": 3, "metadata.json": metadata_size},
        "metadata": {"steps_completed": 400, "note": "x"},
    }
    assert json.loads((storage / sid / "metadata.json").read_text())["note"] == "x"


def test_no_registration_and_no_files_when_the_block_raises(managed: Any) -> None:
    fake, storage = managed
    with core.init() as ctx:
        with (
            pytest.raises(KeyError),
            ctx.checkpoint.store_path({"steps_completed": 1}) as (path, sid),
        ):
            (path / "half.pt").write_bytes(b"x")
            raise KeyError("boom")
        with (
            pytest.raises(ValueError, match="steps_completed"),
            ctx.checkpoint.store_path({"epoch": 1}),
        ):
            pass
    assert fake.posts("/api/v1/trials/3/checkpoints/") == []
    assert not (storage / sid).exists()


def test_preemption_watcher_turns_true_after_the_registry_flips(managed: Any) -> None:
    fake, _ = managed
    with core.init(preempt_poll_interval=0.05) as ctx:
        assert ctx.preempt.should_preempt() is False
        wait_for(
            lambda: any(r["path"].endswith("/preempt/") for r in fake.requests),
            10,
            "the first preemption poll",
            interval=0.02,
        )
        fake.should_preempt = True
        wait_for(ctx.preempt.should_preempt, 10, "the watcher to see the flip", interval=0.02)
        fake.should_preempt = False
        assert ctx.preempt.should_preempt() is True  # stays True
    polls = [r for r in fake.requests if r["path"] == "/api/v1/trials/3/preempt/"]
    assert polls[0]["query"] == {"run_id": "2", "timeout": "20"}  # a long-poll
    assert fake.posts("/api/v1/trials/3/preempt/ack/") == [{"run_id": 2}]


def test_single_searcher_operation_uses_the_configured_length(managed: Any) -> None:
    fake, _ = managed
    with core.init() as ctx:
        assert ctx.searcher.get_configured_units() == core.Unit.BATCHES == "batches"
        ops = []
        for op in ctx.searcher.operations():
            ops.append(op.length)
            op.report_progress(250)
            op.report_progress(300)  # throttled: within a second of the previous one
            op.report_completed(0.25)
    assert ops == [500]
    assert fake.posts("/api/v1/trials/3/progress/") == [{"progress": 0.5}]
    assert fake.posts("/api/v1/trials/3/searcher/completed/") == [{"length": 500, "metric": 0.25}]


def test_operations_follow_the_searchers_lengths(
    managed: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first length comes from the cluster info (an ASHA rung); each answer's
    ``next_length`` yields one more operation, a null answer ends the iteration."""
    fake, _ = managed
    info_path = pathlib.Path(os.environ["HEADWAY_CLUSTER_INFO"])
    info = json.loads(info_path.read_text())
    info["searcher_length"] = 31
    info_path.write_text(json.dumps(info))
    path = "/api/v1/trials/3/searcher/completed/"
    fake.scripts[("POST", path)] = [
        (200, {"recorded": True, "next_length": 125}),
        (200, {"recorded": True, "next_length": None}),
    ]
    with core.init() as ctx:
        lengths = []
        for op in ctx.searcher.operations():
            lengths.append(op.length)
            op.report_completed(1.0 / op.length)
    assert lengths == [31, 125]
    assert fake.posts(path) == [
        {"length": 31, "metric": 1 / 31},
        {"length": 125, "metric": 1 / 125},
    ]


def test_invalid_hp_is_reported_and_the_process_goes_on(managed: Any) -> None:
    fake, _ = managed
    with core.init() as ctx:
        raise core.InvalidHP("batch size 4096 does not fit")
    assert fake.posts("/api/v1/trials/3/searcher/early_exit/") == [{"reason": "invalid_hp"}]
    with core.init() as ctx:
        ctx.searcher.report_early_exit(core.EarlyExitReason.ERRORED)
        with pytest.raises(ValueError):
            ctx.searcher.report_early_exit("bored")  # type: ignore[arg-type]
    assert fake.posts("/api/v1/trials/3/searcher/early_exit/")[-1] == {"reason": "errored"}
    with pytest.raises(ZeroDivisionError), core.init():
        raise ZeroDivisionError  # other errors propagate as before


def test_searcher_requires_report_completed_before_the_next_operation(managed: Any) -> None:
    with core.init() as ctx, pytest.raises(RuntimeError, match="report_completed"):
        for _op in ctx.searcher.operations():
            pass
