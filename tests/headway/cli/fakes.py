"""Fakes shared by the CLI unit tests: a fake HTTP session, a sample config, archive helpers."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any, ClassVar

GOOD_CONFIG = """
name: digits
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 32
searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}
"""


class FakeResponse:
    """What ``Session.stream`` returns, as far as the CLI uses it."""

    def __init__(self, body: bytes) -> None:
        self.raw = io.BytesIO(body)
        self.closed = False

    def close(self) -> None:
        self.closed = True


class FakeSession:
    """Answers GET/POST from a route table; records every call."""

    routes: ClassVar[dict[tuple[str, str], Any]] = {}
    calls: ClassVar[list[tuple[str, str, Any]]] = []

    def __init__(self, master_url: str, token: str | None = None, **_: Any) -> None:
        self.master_url = master_url
        self.token = token

    def _answer(self, method: str, path: str, payload: Any) -> Any:
        FakeSession.calls.append((method, path, payload))
        answer = FakeSession.routes[(method, path)]
        return answer(payload) if callable(answer) else answer

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._answer("GET", path, params)

    def post(self, path: str, json: Any = None) -> Any:
        return self._answer("POST", path, json)

    def stream(self, path: str, params: dict[str, Any] | None = None) -> FakeResponse:
        return self._answer("STREAM", path, params)


def names_in(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path
