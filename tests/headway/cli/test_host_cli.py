"""``headway host list | disable [--drain] | enable | remove`` against a real registry
(pytest-django's live server), as an admin and as a user who is not one."""

from __future__ import annotations

import contextlib
import json

import pytest

from headway.cli.main import main
from registry import scheduling
from registry.models import HostToken, TrialRun, WorkerHost
from tests.helpers import TINY_CONFIG, TINY_MODEL, b64, register_host, start_run


@pytest.fixture
def server(live_server, transactional_db, django_user_model, monkeypatch, tmp_path):
    """The live server's URL; $HEADWAY_TOKEN is an admin's (``.user_token``: a user's)."""
    from rest_framework.authtoken.models import Token

    admin = django_user_model.objects.create_user("ops", is_staff=True)
    user = django_user_model.objects.create_user("erin")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=admin).key)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url, Token.objects.create(user=user).key


@pytest.fixture
def hosts():
    """Hosts ``cli-a`` (1 slot) and ``cli-b`` (2); their queues are emptied at the end (placed
    runs' tasks go there, and no worker of this test takes them)."""
    rows = [register_host("cli-a", 1), register_host("cli-b", 2)]
    yield rows
    from config.celery import app

    with app.connection_for_write() as connection:
        for row in rows:
            with contextlib.suppress(Exception):  # never declared: nothing to purge
                connection.default_channel.queue_purge(row.queue)


def _submit(url: str) -> TrialRun:
    import os

    import requests

    answer = requests.post(
        f"{url}/api/v1/experiments/",
        json={"config": TINY_CONFIG, "model_definition": b64(TINY_MODEL)},
        headers={"Authorization": f"Token {os.environ['HEADWAY_TOKEN']}"},
        timeout=60,
    )
    assert answer.status_code == 201, answer.text
    scheduling.place_queued_runs()
    return TrialRun.objects.get(trial__experiment_id=answer.json()["id"])


def _rows(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    assert lines[0].split() == ["host", "state", "slots", "pool", "heartbeat", "address"]
    return {line.split()[0]: line.split() for line in lines[2:]}


def test_an_admin_drains_disables_enables_and_removes_hosts(server, hosts, capsys):
    url, _ = server
    run = _submit(url)
    assert run.host.name == "cli-a"  # best fit
    start_run(run.trial)  # running there (a placed run not started yet would move on drain)
    HostToken.issue("cli-b")

    assert main(["--master", url, "host", "list"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["cli-a"][:5] == ["cli-a", "enabled,", "alive", "1/1", "default"]
    assert rows["cli-b"][:5] == ["cli-b", "enabled,", "alive", "0/2", "default"]

    assert main(["--master", url, "host", "disable", "cli-a", "--drain"]) == 0
    assert "host cli-a is draining" in capsys.readouterr().out
    assert main(["--master", url, "host", "list", "--json"]) == 0
    listed = {h["name"]: h for h in json.loads(capsys.readouterr().out)}
    assert listed["cli-a"]["state"] == "draining"
    assert listed["cli-a"]["runs"] == [f"trial {run.trial_id} run {run.run_id}"]

    assert main(["--master", url, "host", "disable", "cli-b"]) == 0
    assert "host cli-b is disabled" in capsys.readouterr().out
    assert WorkerHost.objects.get(name="cli-b").admin_state == "disabled"
    assert main(["--master", url, "host", "enable", "cli-b"]) == 0
    assert capsys.readouterr().out.strip() == "host cli-b is enabled"

    assert main(["--master", url, "host", "remove", "cli-a"]) == 1
    err = capsys.readouterr().err
    assert "cli-a still holds runs" in err and f"trial {run.trial_id}" in err
    assert main(["--master", url, "host", "remove", "cli-b"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == "removed host cli-b; its host token was revoked"
    assert not WorkerHost.objects.filter(name="cli-b").exists()

    assert main(["--master", url, "host", "enable", "nope"]) == 1
    assert "No host named nope" in capsys.readouterr().err


def test_a_user_who_is_not_an_admin_is_refused(server, hosts, capsys, monkeypatch):
    url, user_token = server
    monkeypatch.setenv("HEADWAY_TOKEN", user_token)
    for command in (["list"], ["disable", "cli-a"], ["enable", "cli-a"], ["remove", "cli-a"]):
        assert main(["--master", url, "host", *command]) == 1
        assert "Only an admin may operate hosts." in capsys.readouterr().err
    assert WorkerHost.objects.get(name="cli-a").admin_state == "enabled"


def test_the_list_says_why_the_master_drained_a_host(server, hosts, capsys):
    url, _ = server
    reason = "drained automatically: 3 runs in a row were lost on it before their ranks started"
    WorkerHost.objects.filter(name="cli-b").update(admin_state="draining", admin_reason=reason)
    assert main(["--master", url, "host", "list"]) == 0
    out = capsys.readouterr().out
    assert _rows(out)["cli-b"][:2] == ["cli-b", "draining,"]
    assert f"cli-b: {reason}" in out.splitlines()
    assert not any(line.startswith("cli-a:") for line in out.splitlines())  # nothing to say
