"""The admins' webhooks page and ``headway webhook`` against a real registry (pytest-django's
live server for the CLI)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from headway.cli.main import main
from webhooks.events import record
from webhooks.models import Webhook

PUBLIC = "https://93.184.215.14/hooks/headway"


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_user("ops", is_staff=True)


@pytest.mark.django_db
def test_the_page_lists_webhooks_and_deliveries_for_admins_only(admin_user, user):
    hook = Webhook.objects.create(
        name="ops-slack", url=PUBLIC, events=["trial.state_changed"], secret="s" * 20
    )
    (delivery,) = record("trial.state_changed", {"probe": 1}, only=hook, send=False)
    client = Client()
    client.force_login(admin_user)
    page = client.get("/webhooks/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "ops-slack" in html and PUBLIC in html
    assert ">all<" in html  # no workspace filter
    assert f'id="delivery-{delivery.id}"' in html and str(delivery.event_id) in html
    assert 'href="/webhooks/"' in html  # the top bar links it for admins
    client.force_login(user)
    assert client.get("/webhooks/").status_code == 404
    assert 'href="/webhooks/"' not in client.get("/").content.decode()
    assert "ops-slack" not in client.get("/").content.decode()


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_login_page():
    answer = Client().get("/webhooks/")
    assert answer.status_code == 302 and "login" in answer["Location"]


@pytest.fixture
def server(live_server, transactional_db, admin_user, django_user_model, monkeypatch, tmp_path):
    """The live server's URL; $HEADWAY_TOKEN is an admin's; ``.user_token``: a user's."""
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("erin")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=admin_user).key)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url, Token.objects.create(user=user).key


def test_cli_create_list_describe_delete(server, capsys):
    url, _ = server
    code = main(
        [
            "--master", url, "webhook", "create", "ops", PUBLIC,
            "-e", "experiment.state_changed", "-e", "model_alias.moved", "--format", "slack",
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    hook = Webhook.objects.get(name="ops")
    assert out.strip() == hook.secret and "shown only now" in err
    assert (hook.format, hook.events) == (
        "slack",
        ["experiment.state_changed", "model_alias.moved"],
    )
    alias = {"model": "digits", "alias": "champion", "action": "SET", "from_version": None}
    record("model_alias.moved", alias | {"to_version": 1, "url": PUBLIC}, only=hook, send=False)

    assert main(["--master", url, "webhook", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["name"] == "ops" and listed["last_delivery"]["state"] == "PENDING"
    assert "secret" not in listed
    assert main(["--master", url, "webhook", "list"]) == 0
    assert "PENDING" in capsys.readouterr().out
    assert main(["--master", url, "webhook", "describe", str(hook.id)]) == 0
    out = capsys.readouterr().out
    assert "model_alias.moved" in out and PUBLIC in out
    assert main(["--master", url, "webhook", "delete", str(hook.id)]) == 0
    assert not Webhook.objects.exists()
    assert main(["--master", url, "webhook", "describe", str(hook.id)]) == 1


def test_cli_create_with_a_workspace_filter(server, capsys):
    from registry.models import Workspace

    url, _ = server
    vision = Workspace.objects.create(name="vision")
    args = ["--master", url, "webhook", "create", "ops", PUBLIC, "-e", "trial.state_changed"]
    assert main([*args, "--workspace", "vision"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert Webhook.objects.get(name="ops").workspace_id == vision.id
    assert main(["--master", url, "webhook", "list"]) == 0
    assert "vision" in capsys.readouterr().out
    hook = Webhook.objects.get(name="ops")
    assert main(["--master", url, "webhook", "describe", str(hook.id)]) == 0
    assert "workspace: vision" in capsys.readouterr().out
    assert main([*args[:4], "other", PUBLIC, "-e", "trial.state_changed", "-w", "nope"]) == 1
    assert "workspace" in capsys.readouterr().err
    assert not Webhook.objects.filter(name="other").exists()


def test_cli_refusals_name_the_field_and_the_rule(server, capsys, monkeypatch):
    url, user_token = server
    assert (
        main(
            [
                "--master",
                url,
                "webhook",
                "create",
                "x",
                "http://10.0.0.1/h",
                "-e",
                "checkpoint.completed",
            ]
        )
        == 1
    )
    assert "url" in capsys.readouterr().err
    monkeypatch.setenv("HEADWAY_TOKEN", user_token)
    assert main(["--master", url, "webhook", "list"]) == 1
    assert "Only an admin may manage webhooks." in capsys.readouterr().err
    assert not Webhook.objects.exists()
