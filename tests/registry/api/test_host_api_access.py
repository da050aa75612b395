"""Host tokens: issued and revoked by the management command, the REST API and the CLI; what a
host key may do and what it may not, on a live server.

- a key reaches its own host's routes only: another host's run or share is 403, a missing one
  404, and every other route of the API (every user route, the schema, the token admin) 403;
- users (admins included) and run tokens get 403 on the host routes, no credentials 401;
- a revoked key is refused (401) on its very next call: its host stops within one heartbeat
  once the worker uses these routes;
- the OpenAPI schema documents every host route's answer with its wire model.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from headway.cli.main import main as cli_main
from headway.client import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    RegistryAPI,
    UnauthenticatedError,
    wire,
)
from headway.client._routes import HOST_ROUTES
from registry import lifecycle
from registry.models import HostToken
from registry.models.host_token import hash_host_key
from tests.helpers import TINY_CONFIG, TINY_MODEL, start_run
from tests.host_api_helpers import beat, host_api, host_queue, issue_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def users(django_user_model) -> dict[str, Any]:
    return {
        "admin": django_user_model.objects.create_user("hx-admin", is_staff=True),
        "user": django_user_model.objects.create_user("hx-user"),
    }


def _key(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def _refused(call, status: int) -> None:
    with pytest.raises(UnauthenticatedError) as refused:
        call()
    assert refused.value.status == status


def test_the_command_issues_a_key_once_and_revokes_it(live_server, capsys) -> None:
    call_command("headway_host_token", "hx-cmd", "--create")
    key = capsys.readouterr().out.strip()
    assert key.startswith("hwh_")
    stored = HostToken.objects.get(name="hx-cmd")
    assert stored.key_hash == hash_host_key(key) and key not in stored.key_hash
    api = RegistryAPI(live_server.url, key)
    assert beat(api, "hx-cmd").name == "hx-cmd"
    with pytest.raises(CommandError, match="already has a live token"):
        call_command("headway_host_token", "hx-cmd", "--create")
    call_command("headway_host_token", "hx-cmd", "--revoke")
    _refused(lambda: beat(api, "hx-cmd"), 401)  # the very next call
    call_command("headway_host_token", "hx-cmd", "--create")  # a new key after revoking
    assert HostToken.objects.filter(name="hx-cmd").count() == 2
    with pytest.raises(CommandError, match="invalid host name"):
        call_command("headway_host_token", "../etc", "--create")


def test_admins_manage_host_tokens_over_rest(live_server, users) -> None:
    admin = RegistryAPI(live_server.url, _key(users["admin"]))
    created = admin.host_token_create("hx-rest")
    assert created.name == "hx-rest" and created.created_by == "hx-admin"
    listed = admin.host_token_list()
    assert [(t.name, t.revoked_at) for t in listed] == [("hx-rest", None)]
    assert "key" not in listed[0].model_dump()
    with pytest.raises(ConflictError):
        admin.host_token_create("hx-rest")
    host = RegistryAPI(live_server.url, created.key)
    beat(host, "hx-rest")
    assert admin.host_token_list()[0].last_used_at is not None
    # Neither users nor hosts manage tokens.
    for key in (_key(users["user"]), created.key):
        _refused(lambda key=key: RegistryAPI(live_server.url, key).host_token_list(), 403)
        _refused(lambda key=key: RegistryAPI(live_server.url, key).host_token_create("x"), 403)
    revoked = admin.host_token_revoke("hx-rest")
    assert revoked.revoked_at is not None
    _refused(lambda: beat(host, "hx-rest"), 401)
    with pytest.raises(NotFoundError):
        admin.host_token_revoke("hx-rest")


def test_the_cli_creates_lists_and_revokes(live_server, users, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HEADWAY_TOKEN", _key(users["admin"]))
    master = ["--master", live_server.url, "host-token"]
    assert cli_main([*master, "create", "hx-cli"]) == 0
    key = capsys.readouterr().out.strip()
    assert HostToken.objects.for_key(key).name == "hx-cli"
    assert cli_main([*master, "list"]) == 0
    assert "hx-cli" in capsys.readouterr().out
    assert cli_main([*master, "revoke", "hx-cli"]) == 0
    assert HostToken.objects.for_key(key) is None
    assert cli_main([*master, "revoke", "hx-cli"]) == 1  # none left: the master's 404
    monkeypatch.setenv("HEADWAY_TOKEN", _key(users["user"]))
    assert cli_main([*master, "create", "hx-cli2"]) == 1
    assert "Only an admin" in capsys.readouterr().err


def test_a_host_cannot_touch_another_hosts_runs(live_server, users) -> None:
    mine = host_api(live_server, "hx-own")
    experiment = lifecycle.experiment_create(
        owner=users["user"], config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    trial = experiment.trials.get()
    other = host_api(live_server, "hx-other")  # registered after the placement: idle
    ids = (trial.id, 1)
    for call in (
        lambda: other.run_claim(*ids, worker="x"),
        lambda: other.run_spec(*ids),
        lambda: other.run_model_definition(*ids),
        lambda: other.run_token(*ids),
        lambda: other.run_running(*ids),
        lambda: other.run_heartbeat(*ids),
        lambda: other.run_preempt(*ids),
        lambda: other.run_exit(*ids, exit_code=1),
        lambda: other.run_logs(*ids, ["forged"]),
        lambda: other.run_shares(*ids),
    ):
        _refused(call, 403)
    assert mine.run_claim(*ids, worker="mine").claimed
    with pytest.raises(NotFoundError):
        mine.run_spec(trial.id, 99)
    with pytest.raises(NotFoundError):
        mine.share_claim(*ids, 1, worker="x")
    # A host's queue is named from its token: it cannot divert another host's runs.
    assert beat(other, "hx-other").queue == host_queue("hx-other")
    with pytest.raises(BadRequestError, match="unknown resource pool"):
        other.host_heartbeat(
            pool="no-such-pool", devices=[], gpu=False, started_at=trial.created_at
        )


def _api_routes() -> list[tuple[str, Any]]:
    found = []

    def walk(patterns, namespace=None):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, pattern.namespace or namespace)
            elif isinstance(pattern, URLPattern) and namespace == "registry-api":
                found.append((pattern.name, pattern))

    walk(get_resolver().url_patterns)
    return found


def _url(name: str, pattern: URLPattern) -> str:
    """A URL of route ``name`` (the permission is checked before any object is read)."""
    values = {"uuid": str(uuid.uuid4()), "name": "x", "model_name": "m", "format": "json"}
    kwargs = {key: values.get(key, "1") for key in pattern.pattern.regex.groupindex}
    return reverse(f"registry-api:{name}", kwargs=kwargs)


def test_a_host_key_is_refused_everywhere_else_and_users_on_host_routes(live_server, users):
    key = issue_key("hx-scope")
    user_key, admin_key = _key(users["user"]), _key(users["admin"])
    experiment = lifecycle.experiment_create(
        owner=users["user"], config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    run_key = start_run(experiment.trials.get()).token
    checked = 0
    for name, pattern in _api_routes():
        callback = pattern.callback
        actions = getattr(callback, "actions", None) or {
            m: m for m in ("get", "post", "put", "patch", "delete") if hasattr(callback.cls, m)
        }
        for method in sorted(set(actions) - {"head", "options"}):
            url = live_server.url + _url(name, pattern)
            host_route = name.startswith("host-") and not name.startswith("host-token")
            if name == "login":
                continue  # public: takes no token at all
            if host_route:
                for principal in (user_key, admin_key, run_key):
                    answer = requests.request(method, url, headers=_auth(principal), json={})
                    assert answer.status_code == 403, (name, method, answer.status_code)
                assert requests.request(method, url, json={}).status_code == 401
            else:
                answer = requests.request(method, url, headers=_auth(key), json={})
                assert answer.status_code == 403, (name, method, answer.status_code)
            checked += 1
    assert checked > 40


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Token {key}"}


def test_the_schema_documents_every_host_route_with_its_model(live_server, users) -> None:
    schema = RegistryAPI(live_server.url, _key(users["admin"])).session.get(
        "schema/", params={"format": "json"}
    )
    models = {
        "host_stopped": None,
        "run_model_definition": "binary",
        "share_model_definition": "binary",
    }
    for name, (method, template) in HOST_ROUTES.items():
        path = "/api/v1/" + template
        operation = schema["paths"][path][method.lower()]
        responses = operation["responses"]
        for code in ("401", "403", "503"):
            assert code in responses, (name, code)
        ok = next(code for code in ("200", "201", "204") if code in responses)
        expected = models.get(name, "model")
        if expected == "model":
            ref = responses[ok]["content"]["application/json"]["schema"]["$ref"]
            component = ref.rsplit("/", 1)[1]
            assert hasattr(wire, component), (name, component)
            assert set(schema["components"]["schemas"][component]["properties"]) == set(
                getattr(wire, component).model_fields
            )
        elif expected == "binary":
            assert "application/gzip" in responses[ok]["content"], name


def test_a_host_agent_cannot_join_a_slurm_pool(live_server, settings, tmp_path) -> None:
    # A slurm pool's hosts are the nodes of its jobs, made by the master (registry.pools.slurm): an
    # agent that names it is refused, so it can never be handed a run meant for a job.
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: hpc, type: slurm, partition: debug}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)
    agent = host_api(live_server, "hx-agent")
    with pytest.raises(BadRequestError, match="pool 'hpc' is a slurm pool"):
        agent.host_heartbeat(pool="hpc", devices=["cpu0"], gpu=False, started_at=timezone.now())
    assert beat(agent, "hx-agent").name == "hx-agent"  # the default (agent) pool still takes it
