"""Unit tests of the CLI's control commands with a fake HTTP session (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from headway import expconf
from headway.cli import (
    OverrideError,
    merge_hparam_overrides,
    parse_hparam_overrides,
    parse_max_length,
)
from headway.cli.main import build_parser, main
from headway.client import ConflictError
from tests.headway.cli.fakes import FakeSession

# --- controls -----------------------------------------------------------------------------


def test_parser_builds_the_control_commands() -> None:
    parser = build_parser()
    for action in ("pause", "activate", "cancel", "kill", "archive", "unarchive"):
        args = parser.parse_args(["experiment", action, "3"])
        assert (args.func.__name__, args.action, args.id) == ("cmd_experiment_control", action, 3)
    for action in ("pause", "activate", "cancel", "kill"):
        args = parser.parse_args(["t", action, "7"])
        assert (args.func.__name__, args.action, args.id) == ("cmd_trial_control", action, 7)
    args = parser.parse_args(
        ["t", "continue", "7", "--checkpoint", "u", "--max-length", "epochs=2", "--hparam", "a=1"]
    )
    assert (args.checkpoint, args.max_length, args.hparam, args.follow) == (
        "u",
        "epochs=2",
        ["a=1"],
        False,
    )


def test_the_cli_reexports_the_one_override_parser() -> None:
    # The parsers live in headway.expconf; the CLI's public names are the same objects.
    assert (OverrideError, merge_hparam_overrides, parse_hparam_overrides, parse_max_length) == (
        expconf.OverrideError,
        expconf.merge_hparam_overrides,
        expconf.parse_hparam_overrides,
        expconf.parse_max_length,
    )


def test_controls_post_and_print_the_new_state(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("POST", "experiments/3/archive/")] = {
        "id": 3,
        "state": "CANCELED",
        "archived": True,
    }
    fake.routes[("POST", "trials/7/pause/")] = {"id": 7, "experiment_id": 3, "state": "PAUSED"}
    assert main(["experiment", "archive", "3"]) == 0
    assert main(["trial", "pause", "7"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Experiment 3: CANCELED (archived)",
        "Trial 7: PAUSED",
    ]


def test_conflict_prints_the_masters_reason_and_exits_1(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    detail = "trial 7 is COMPLETED; it can be paused only when ACTIVE"

    def conflict(_: Any) -> Any:
        raise ConflictError(f"POST trials/7/pause/: HTTP 409: {detail}", 409, {"detail": detail})

    fake.routes[("POST", "trials/7/pause/")] = conflict
    assert main(["trial", "pause", "7"]) == 1
    assert capsys.readouterr().err.strip() == f"error: {detail}"


def test_continue_merges_nested_overrides_and_follows(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "trials/7/")] = {
        "id": 7,
        "experiment_id": 3,
        "state": "COMPLETED",
        "hparams": {"opt": {"name": "sgd", "lr": 0.1}},
    }
    fake.routes[("POST", "trials/7/continue/")] = {"id": 12, "state": "ACTIVE"}
    fake.routes[("GET", "experiments/12/")] = {"id": 12, "state": "COMPLETED", "progress": 1.0}
    argv = ["t", "continue", "7", "--max-length", "batches=5", "--hparam", "opt.lr=0.5", "-f"]
    assert main(argv) == 0
    posted = [payload for method, path, payload in fake.calls if method == "POST"]
    assert posted == [
        {"max_length": {"batches": 5}, "hparams": {"opt": {"name": "sgd", "lr": 0.5}}}
    ]
    out = capsys.readouterr().out
    assert "Created experiment 12 (continues trial 7)" in out
    assert "Experiment 12 COMPLETED" in out


def test_continue_with_a_bad_override_sends_nothing(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["t", "continue", "7", "--hparam", "lr"]) == 2
    assert fake.calls == []
    assert "NAME=VALUE" in capsys.readouterr().err
