"""``headway worker list`` with a fake HTTP session (no server needed)."""

from __future__ import annotations

import json

import pytest

from headway.cli.main import build_parser, main
from tests.headway.cli.fakes import FakeSession

HOSTS = [
    {
        "name": "gpu-a",
        "pool": "big",
        "slots": 2,
        "slots_in_use": 1,
        "devices": ["0", "1"],
        "gpu": True,
        "alive": True,
        "heartbeat_at": "2026-01-02T03:04:05.678Z",
        "started_at": "2026-01-02T01:00:00Z",
        "runs": [
            {
                "trial_id": 7,
                "experiment_id": 3,
                "run_id": 2,
                "state": "RUNNING",
                "slots": 1,
                "devices": ["1"],
                "started_at": "2026-01-02T03:00:00Z",
            }
        ],
    },
    {
        "name": "cpu-b",
        "pool": "default",
        "slots": 1,
        "slots_in_use": 0,
        "devices": ["cpu0"],
        "gpu": False,
        "alive": False,
        "heartbeat_at": None,
        "started_at": "2026-01-01T00:00:00Z",
        "runs": [],
    },
]


def test_the_parser_has_worker_list() -> None:
    args = build_parser().parse_args(["worker", "list", "--json"])
    assert args.func.__name__ == "cmd_list" and args.json is True
    assert build_parser().parse_args(["w", "list"]).json is False


def test_worker_list_prints_hosts_then_runs(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "workers/")] = {"count": 2, "next": None, "results": HOSTS}
    assert main(["worker", "list"]) == 0
    out = capsys.readouterr().out
    hosts, runs = out.split("\nRuns:\n")
    header, _, a, b = hosts.strip().splitlines()
    assert header.split()[:4] == ["host", "alive", "slots", "in"]
    assert a.split()[:7] == ["gpu-a", "yes", "2", "1", "0,1", "gpu", "2026-01-02"]
    assert b.split()[:6] == ["cpu-b", "NO", "1", "0", "cpu0", "cpu"]
    assert (header.split()[-1], a.split()[-1], b.split()[-1]) == ("pool", "big", "default")
    (run,) = runs.strip().splitlines()[2:]
    assert run.split()[:6] == ["gpu-a", "7", "3", "2", "RUNNING", "1"]


def test_worker_list_json_and_no_hosts(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "workers/")] = {"count": 2, "next": None, "results": HOSTS}
    assert main(["worker", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == HOSTS
    fake.routes[("GET", "workers/")] = {"count": 0, "next": None, "results": []}
    assert main(["worker", "list"]) == 0
    assert "Runs:" not in capsys.readouterr().out
