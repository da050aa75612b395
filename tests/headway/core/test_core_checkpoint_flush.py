"""A checkpoint is registered only after the metrics reported before it are delivered."""

from __future__ import annotations

from types import SimpleNamespace

from headway.core._checkpoint_registry import RESTCheckpointRegistry


class RecordingSession:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def request(self, method: str, path: str, json: object = None, headers: dict | None = None):
        self.calls.append(f"{method} {path} Prefer: {(headers or {}).get('Prefer')}")
        uuid = json["uuid"] if isinstance(json, dict) else None
        answer = {"uuid": uuid, "trial_id": 7, "steps_completed": 40, "state": "COMPLETED"}
        return SimpleNamespace(json=lambda: answer)


def test_metrics_are_flushed_before_the_checkpoint_is_registered() -> None:
    calls: list[str] = []
    registry = RESTCheckpointRegistry(
        RecordingSession(calls),  # type: ignore[arg-type]
        trial_id=7,
        run_id=2,
        flush_metrics=lambda: calls.append("flush"),
    )
    registry.register("uuid-1", 40, {"state-dict.pth": 10}, {"steps_completed": 40})
    # A run that dies right after this resumes after step 40: nothing before it may be queued.
    # The answer is not read: the registry is asked for the minimal one (RFC 7240).
    assert calls == ["flush", "POST trials/7/checkpoints/ Prefer: return=minimal"]
