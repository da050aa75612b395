"""Fixtures of the CLI unit tests: the fake session installed in place of the real one, a model dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from headway.cli import (
    _common,
)
from tests.headway.cli.fakes import FakeSession


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> type[FakeSession]:
    FakeSession.routes = {}
    FakeSession.calls = []
    monkeypatch.setattr(_common, "Session", FakeSession)
    monkeypatch.setattr(_common, "POLL_INTERVAL_S", 0.0)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_TOKEN", raising=False)
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return FakeSession


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    root = tmp_path / "model"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "model_def.py").write_text("class DigitsTrial: ...\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "stale.pyc").write_bytes(b"\0")
    (root / ".git" / "HEAD").write_text("ref: x\n")
    return root
