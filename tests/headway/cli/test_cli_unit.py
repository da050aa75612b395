"""Unit tests of the ``headway`` CLI with a fake HTTP session (no server needed)."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from headway.archive import ModelDefinitionError, pack_model_definition
from headway.cli import (
    _common,
)
from headway.cli.main import build_parser, main
from headway.client import Session, read_token, resolve_token, save_token, token_file
from tests.headway.cli.fakes import GOOD_CONFIG, FakeSession, names_in, write_config

# --- parser -------------------------------------------------------------------------------


def test_parser_builds_every_command() -> None:
    parser = build_parser()
    args = parser.parse_args(["--master", "http://m:1", "e", "create", "c.yaml", "dir", "-f"])
    assert (args.master, args.config, args.model_dir, args.follow) == (
        "http://m:1",
        "c.yaml",
        "dir",
        True,
    )
    assert args.func.__name__ == "cmd_create"
    assert parser.parse_args(["experiment", "list", "--all"]).all is True
    assert parser.parse_args(["experiment", "describe", "3", "--json"]).json is True
    assert parser.parse_args(["trial", "logs", "4", "--follow"]).follow is True
    assert parser.parse_args(["trial", "describe", "4"]).id == 4
    assert parser.parse_args(["checkpoint", "list", "2"]).experiment_id == 2
    download = parser.parse_args(["checkpoint", "download", "abc", "-o", "out"])
    assert (download.uuid, download.output) == ("abc", "out")
    login = parser.parse_args(["login", "--username", "u", "--password", "p"])
    assert (login.username, login.password) == ("u", "p")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trial", "describe", "not-a-number"]) == 2
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_master_url_prefers_flag_then_env_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = build_parser()
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    assert _common.master_url(parser.parse_args(["experiment", "list"])) == "http://127.0.0.1:8000"
    monkeypatch.setenv("HEADWAY_MASTER", "http://env:9/")
    assert _common.master_url(parser.parse_args(["experiment", "list"])) == "http://env:9"
    args = parser.parse_args(["--master", "http://flag:1", "experiment", "list"])
    assert _common.master_url(args) == "http://flag:1"


# --- model definition packing -------------------------------------------------------------


def test_pack_skips_caches_and_vcs(model_dir: Path) -> None:
    names = names_in(pack_model_definition(model_dir, 1 << 20))
    assert set(names) == {"model_def.py", "pkg", "pkg/__init__.py"}
    assert names["model_def.py"].uid == 0 and names["model_def.py"].uname == ""


def test_pack_stores_a_copy_of_files_that_inside_symlinks_point_to(model_dir: Path) -> None:
    (model_dir / "pkg" / "alias.py").symlink_to(model_dir / "model_def.py")
    member = names_in(pack_model_definition(model_dir, 1 << 20))["pkg/alias.py"]
    assert member.isfile() and member.size == (model_dir / "model_def.py").stat().st_size


def test_pack_rejects_symlinks_leaving_the_directory(model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x")
    (model_dir / "pkg" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ModelDefinitionError, match=r"pkg/leak\.txt.*outside the model directory"):
        pack_model_definition(model_dir, 1 << 20)


def test_pack_enforces_the_size_limit(model_dir: Path) -> None:
    (model_dir / "weights.bin").write_bytes(os.urandom(300_000))
    with pytest.raises(ModelDefinitionError, match="over the size limit"):
        pack_model_definition(model_dir, 100_000)


def test_pack_rejects_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelDefinitionError, match="does not exist"):
        pack_model_definition(tmp_path / "nope", 1 << 20)


# --- experiment create --------------------------------------------------------------------


def test_create_with_a_bad_config_exits_2_without_any_request(
    fake: type[FakeSession],
    tmp_path: Path,
    model_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_http(*_: Any, **__: Any) -> Any:
        raise AssertionError("no request may be sent for a bad config")

    monkeypatch.setattr(Session, "request", no_http)
    config = write_config(
        tmp_path, GOOD_CONFIG.replace("max_length: {batches: 100}", "max_length: 0")
    )
    assert main(["experiment", "create", str(config), str(model_dir)]) == 2
    err = capsys.readouterr().err
    assert "searcher.max_length" in err and str(config) in err
    assert "Traceback" not in err
    assert fake.calls == []


def test_create_with_a_missing_model_dir_exits_2(
    fake: type[FakeSession], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, GOOD_CONFIG)
    assert main(["experiment", "create", str(config), str(tmp_path / "missing")]) == 2
    assert "missing does not exist" in capsys.readouterr().err
    assert fake.calls == []


def test_create_with_a_missing_config_file_exits_2(
    fake: type[FakeSession], tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["experiment", "create", str(tmp_path / "nope.yaml"), str(model_dir)]) == 2
    assert "cannot read config" in capsys.readouterr().err


def test_create_posts_config_text_and_packed_code_then_follows(
    fake: type[FakeSession], tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, GOOD_CONFIG)
    fake.routes[("POST", "experiments/")] = {"id": 7, "state": "ACTIVE"}
    states = iter([("ACTIVE", 0.2), ("ACTIVE", 0.7), ("COMPLETED", 1.0)])

    def poll(_: Any) -> dict[str, Any]:
        state, progress = next(states)
        return {"id": 7, "state": state, "progress": progress}

    fake.routes[("GET", "experiments/7/")] = poll
    assert main(["experiment", "create", str(config), str(model_dir), "--follow"]) == 0
    method, path, body = fake.calls[0]
    assert (method, path) == ("POST", "experiments/")
    assert body["config"] == GOOD_CONFIG
    assert "model_def.py" in names_in(base64.b64decode(body["model_definition"]))
    out = capsys.readouterr().out
    assert "Created experiment 7" in out and "Experiment 7 COMPLETED" in out


@pytest.mark.parametrize("final", ["ERROR", "PAUSED", "CANCELED"])
def test_follow_exits_1_unless_completed(
    fake: type[FakeSession], tmp_path: Path, model_dir: Path, final: str
) -> None:
    fake.routes[("POST", "experiments/")] = {"id": 8}
    fake.routes[("GET", "experiments/8/")] = {"id": 8, "state": final, "progress": 0.5}
    config = write_config(tmp_path, GOOD_CONFIG)
    assert main(["experiment", "create", str(config), str(model_dir), "-f"]) == 1


# --- reading commands ---------------------------------------------------------------------


def test_experiment_list_hides_archived_unless_all(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "experiments/")] = {
        "count": 2,
        "next": None,
        "results": [
            {"id": 1, "name": "kept", "state": "ACTIVE", "progress": 0.25, "archived": False},
            {"id": 2, "name": "old", "state": "COMPLETED", "progress": 1.0, "archived": True},
        ],
    }
    assert main(["experiment", "list"]) == 0
    out = capsys.readouterr().out
    assert "kept" in out and "25%" in out and "old" not in out
    assert main(["experiment", "list", "--all"]) == 0
    assert "old" in capsys.readouterr().out


# A field this client does not know (a newer registry's) is kept and printed as sent.
TRIAL_9 = {"id": 9, "experiment_id": 3, "state": "ACTIVE", "from_a_newer_registry": {"x": 1}}


def test_experiment_describe_json(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "experiments/3/")] = {"id": 3, "name": "x", "state": "ACTIVE"}
    fake.routes[("GET", "experiments/3/trials/")] = {"next": None, "results": [TRIAL_9]}
    assert main(["experiment", "describe", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "experiment": {"id": 3, "name": "x", "state": "ACTIVE"},
        "trials": [TRIAL_9],  # as sent, no field added
    }
    fake.routes[("GET", "experiments/3/")] |= {
        "searcher_name": "adaptive_asha",
        "searcher_metric": "validation_loss",
    }
    assert main(["experiment", "describe", "3"]) == 0
    out = capsys.readouterr().out
    assert "Trials:" in out
    assert re.search(r"searcher:\s+adaptive_asha", out) and re.search(
        r"metric:\s+validation_loss", out
    )


def test_trial_describe_prints_metrics_and_checkpoints(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "trials/4/")] = {
        "id": 4,
        "experiment_id": 3,
        "state": "COMPLETED",
        "hparams": {"lr": 0.1, "opt": {"momentum": 0.9}},
        "summary_metrics": {"training": {"loss": {"last": 0.5, "min": 0.4, "max": 2, "count": 3}}},
    }
    fake.routes[("GET", "trials/4/checkpoints/")] = [
        {"uuid": "u-1", "trial_id": 4, "steps_completed": 100, "state": "COMPLETED", "size": 2048}
    ]
    assert main(["trial", "describe", "4"]) == 0
    out = capsys.readouterr().out
    assert "opt.momentum" in out and "loss" in out and "u-1" in out and "2.0 KiB" in out


def test_trial_describe_says_how_many_series_it_did_not_show(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    embedded = {f"m{i}": {"last": 1.0} for i in range(100)}
    fake.routes[("GET", "trials/4/")] = {
        "id": 4,
        "experiment_id": 3,
        "state": "ACTIVE",
        "summary_metrics": {"training": embedded},
        "summary_metrics_count": 10_000,
    }
    fake.routes[("GET", "trials/4/checkpoints/")] = []
    assert main(["trial", "describe", "4"]) == 0
    assert "... and 9900 more series (headway trial metrics 4)" in capsys.readouterr().out


def test_trial_logs_follow_pages_until_the_trial_ends(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    pages = {
        None: [{"id": 1, "message": "one\n"}, {"id": 2, "message": "two"}],
        2: [],
    }
    polls = iter(["RUNNING_STATE", "COMPLETED"])
    seen_after: list[Any] = []

    def logs(params: dict[str, Any]) -> Any:
        after = params.get("after")
        seen_after.append(after)
        if after == 2 and len(seen_after) == 3:  # a line written while the trial finished
            return {"results": [{"id": 3, "message": "three"}], "next": None}
        return {"results": pages.get(after, []), "next": None}

    fake.routes[("GET", "trials/5/logs/")] = logs
    fake.routes[("GET", "trials/5/")] = lambda _: {
        "id": 5,
        "experiment_id": 3,
        "state": next(polls),
    }
    assert main(["trial", "logs", "5", "--follow"]) == 0
    assert capsys.readouterr().out.splitlines() == ["one", "two", "three"]


# --- auth -----------------------------------------------------------------------------------


def test_token_file_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "hw"))
    monkeypatch.delenv("HEADWAY_TOKEN", raising=False)
    path = save_token("http://a:1/", "tok-a", "alice")
    save_token("http://b:2", "tok-b", "bob")
    assert path == token_file() == tmp_path / "hw" / "token.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_token("http://a:1") == "tok-a"
    assert read_token("http://b:2") == "tok-b"
    assert read_token("http://c:3") is None
    monkeypatch.setenv("HEADWAY_TOKEN", "from-env")
    assert resolve_token("http://a:1") == "from-env"


def test_login_saves_the_token_and_later_commands_send_it(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("POST", "auth/login/")] = {"token": "secret", "username": "alice"}
    assert main(["--master", "http://m:5", "login", "-u", "alice", "-p", "pw"]) == 0
    assert fake.calls[0] == ("POST", "auth/login/", {"username": "alice", "password": "pw"})
    assert read_token("http://m:5") == "secret"
    assert "Logged in" in capsys.readouterr().out
    assert (
        _common.make_session(
            build_parser().parse_args(["--master", "http://m:5", "e", "list"])
        ).token
        == "secret"
    )


def test_connection_refused_gives_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path))
    monkeypatch.setattr(_common, "CLI_MAX_RETRIES", 0)
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    master = f"http://127.0.0.1:{port}"
    assert main(["--master", master, "experiment", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert master in err and "connection refused" in err
