"""Unit tests of the ``headway`` CLI with a fake HTTP session (no server needed)."""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import stat
import tarfile
from pathlib import Path
from typing import Any

import pytest

from headway.cli import (
    OverrideError,
    _common,
    merge_hparam_overrides,
    parse_hparam_overrides,
    parse_max_length,
)
from headway.cli._model_def import ModelDefinitionError, pack_model_definition
from headway.cli._token import read_token, resolve_token, save_token, token_file
from headway.cli.main import build_parser, main
from headway.client import ConflictError, Session

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

    routes: dict[tuple[str, str], Any] = {}
    calls: list[tuple[str, str, Any]] = []

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


def _names(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def _write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


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
    names = _names(pack_model_definition(model_dir, 1 << 20))
    assert set(names) == {"model_def.py", "pkg", "pkg/__init__.py"}
    assert names["model_def.py"].uid == 0 and names["model_def.py"].uname == ""


def test_pack_keeps_inside_symlinks_relative(model_dir: Path) -> None:
    (model_dir / "pkg" / "alias.py").symlink_to(model_dir / "model_def.py")
    member = _names(pack_model_definition(model_dir, 1 << 20))["pkg/alias.py"]
    assert member.issym() and member.linkname == "../model_def.py"


def test_pack_rejects_symlinks_leaving_the_directory(model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("x")
    (model_dir / "pkg" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ModelDefinitionError, match="pkg/leak.txt.*outside the model directory"):
        pack_model_definition(model_dir, 1 << 20)


def test_pack_enforces_the_size_limit(model_dir: Path) -> None:
    (model_dir / "weights.bin").write_bytes(os.urandom(300_000))
    with pytest.raises(ModelDefinitionError, match="over the .* MiB limit"):
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
    config = _write_config(
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
    config = _write_config(tmp_path, GOOD_CONFIG)
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
    config = _write_config(tmp_path, GOOD_CONFIG)
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
    assert "model_def.py" in _names(base64.b64decode(body["model_definition"]))
    out = capsys.readouterr().out
    assert "Created experiment 7" in out and "Experiment 7 COMPLETED" in out


@pytest.mark.parametrize("final", ["ERROR", "PAUSED", "CANCELED"])
def test_follow_exits_1_unless_completed(
    fake: type[FakeSession], tmp_path: Path, model_dir: Path, final: str
) -> None:
    fake.routes[("POST", "experiments/")] = {"id": 8}
    fake.routes[("GET", "experiments/8/")] = {"id": 8, "state": final, "progress": 0.5}
    config = _write_config(tmp_path, GOOD_CONFIG)
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


def test_experiment_describe_json(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "experiments/3/")] = {"id": 3, "name": "x", "state": "ACTIVE"}
    fake.routes[("GET", "experiments/3/trials/")] = {"next": None, "results": [{"id": 9}]}
    assert main(["experiment", "describe", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "experiment": {"id": 3, "name": "x", "state": "ACTIVE"},
        "trials": [{"id": 9}],
    }
    assert main(["experiment", "describe", "3"]) == 0
    assert "Trials:" in capsys.readouterr().out


def test_trial_describe_prints_metrics_and_checkpoints(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("GET", "trials/4/")] = {
        "id": 4,
        "state": "COMPLETED",
        "hparams": {"lr": 0.1, "opt": {"momentum": 0.9}},
        "summary_metrics": {"training": {"loss": {"last": 0.5, "min": 0.4, "max": 2, "count": 3}}},
    }
    fake.routes[("GET", "trials/4/checkpoints/")] = [
        {"uuid": "u-1", "steps_completed": 100, "state": "COMPLETED", "size": 2048}
    ]
    assert main(["trial", "describe", "4"]) == 0
    out = capsys.readouterr().out
    assert "opt.momentum" in out and "loss" in out and "u-1" in out and "2.0 KiB" in out


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
    fake.routes[("GET", "trials/5/")] = lambda _: {"id": 5, "state": next(polls)}
    assert main(["trial", "logs", "5", "--follow"]) == 0
    assert capsys.readouterr().out.splitlines() == ["one", "two", "three"]


def test_checkpoint_download_extracts_into_dir(
    fake: type[FakeSession], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in {"state.pth": b"weights", "code/model_def.py": b"x = 1\n"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    fake.routes[("STREAM", "checkpoints/abc/download")] = FakeResponse(buffer.getvalue())
    out_dir = tmp_path / "ckpt"
    assert main(["checkpoint", "download", "abc", "-o", str(out_dir)]) == 0
    assert (out_dir / "state.pth").read_bytes() == b"weights"
    assert (out_dir / "code" / "model_def.py").exists()
    assert capsys.readouterr().out.strip() == str(out_dir.resolve())


def test_checkpoint_download_refuses_paths_escaping_the_dir(
    fake: type[FakeSession], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    fake.routes[("STREAM", "checkpoints/bad/download")] = FakeResponse(buffer.getvalue())
    assert main(["checkpoint", "download", "bad", "-o", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "escaped.txt").exists()
    assert "unsafe or corrupt archive" in capsys.readouterr().err


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
    fake.routes[("POST", "auth/login/")] = {"token": "secret"}
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


def test_hparam_overrides_are_yaml_scalars_nested_by_dotted_names() -> None:
    overrides = parse_hparam_overrides(
        ["lr=0.01", "wd=1e-4", "layers=3", "opt.name=adam", "opt.beta= 0.9", " ", "x=", "on=true"]
    )
    assert overrides == {
        "lr": 0.01,
        "wd": 1e-4,
        "layers": 3,
        "opt": {"name": "adam", "beta": 0.9},
        "x": None,
        "on": True,
    }
    current = {"lr": 0.1, "opt": {"name": "sgd", "momentum": 0.9, "beta": 0.5}}
    merged = merge_hparam_overrides(current, {"opt": {"beta": 0.9}})
    assert merged == {"opt": {"name": "sgd", "momentum": 0.9, "beta": 0.9}}
    assert current["opt"]["beta"] == 0.5  # not modified


@pytest.mark.parametrize("item", ["lr", "=1", "a..b=1", "lr=[1"])
def test_bad_hparam_overrides_name_the_item(item: str) -> None:
    with pytest.raises(OverrideError, match="hyperparameter"):
        parse_hparam_overrides([item])


def test_max_length_override_forms() -> None:
    assert parse_max_length("20") == 20
    assert parse_max_length("epochs=2") == {"epochs": 2}
    assert parse_max_length(" Records = 5 ") == {"records": 5}
    for bad in ("0", "-1", "x", "weeks=2", "epochs=", "batches=1.5"):
        with pytest.raises(OverrideError, match="max_length"):
            parse_max_length(bad)


def test_controls_post_and_print_the_new_state(
    fake: type[FakeSession], capsys: pytest.CaptureFixture[str]
) -> None:
    fake.routes[("POST", "experiments/3/archive/")] = {
        "id": 3,
        "state": "CANCELED",
        "archived": True,
    }
    fake.routes[("POST", "trials/7/pause/")] = {"id": 7, "state": "PAUSED"}
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
    fake.routes[("GET", "trials/7/")] = {"id": 7, "hparams": {"opt": {"name": "sgd", "lr": 0.1}}}
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
