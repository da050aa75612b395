"""``/api/v1/webhooks/``: admins only, validation answered 400 naming the field (an unknown
workspace included), SSRF refusals, the secret shown once, the workspace filter set by id or
name and cleared with null."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.django_db

URL = "/api/v1/webhooks/"
# Resolves to a global address without a network lookup (an IP literal): the check passes.
PUBLIC = "https://93.184.215.14/hooks/headway?x=1"


@pytest.fixture
def admin(django_user_model) -> APIClient:
    user = django_user_model.objects.create_user("ops", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _create(client, **fields):
    body = {"name": "ops", "url": PUBLIC, "events": ["experiment.state_changed"]} | fields
    return client.post(URL, body, format="json")


def test_a_user_who_is_not_an_admin_can_neither_list_nor_create(api):
    assert api.get(URL).status_code == 403
    assert _create(api).status_code == 403
    assert not Webhook.objects.exists()
    hook = Webhook.objects.create(name="x", url=PUBLIC, events=[], secret="s" * 20)
    for answer in (
        api.get(f"{URL}{hook.id}/"),
        api.patch(f"{URL}{hook.id}/", {"enabled": False}, format="json"),
        api.delete(f"{URL}{hook.id}/"),
        api.get(f"{URL}{hook.id}/deliveries/"),
        api.post(f"{URL}{hook.id}/test/"),
    ):
        assert answer.status_code == 403, answer.content
    assert Webhook.objects.get(id=hook.id).enabled


def test_anonymous_requests_are_refused():
    assert APIClient().get(URL).status_code in (401, 403)


def test_create_list_describe_change_delete(admin):
    created = _create(admin, format="slack", events=["trial.state_changed", "checkpoint.completed"])
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert body["events"] == ["checkpoint.completed", "trial.state_changed"]
    assert (body["format"], body["enabled"], body["created_by"]) == ("slack", True, "ops")
    hook_id = body["id"]
    listed = admin.get(URL).json()["webhooks"]
    assert [h["id"] for h in listed] == [hook_id]
    assert "secret" not in listed[0] and listed[0]["last_delivery"] is None
    assert "secret" not in admin.get(f"{URL}{hook_id}/").json()
    changed = admin.patch(f"{URL}{hook_id}/", {"enabled": False, "name": "renamed"}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["enabled"], changed.json()["name"]) == (False, "renamed")
    assert admin.get(f"{URL}{hook_id}/deliveries/").json() == {"deliveries": []}
    assert admin.delete(f"{URL}{hook_id}/").status_code == 204
    assert admin.get(f"{URL}{hook_id}/").status_code == 404


def test_an_admins_own_secret_is_kept(admin):
    assert _create(admin, secret="my-own-secret-of-24-chars").json()["secret"] == (
        "my-own-secret-of-24-chars"
    )


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"workspace": "research"}, "workspace"),  # no workspace of that name
        ({"workspace": 987654321}, "workspace"),
        ({"workspace": 2**70}, "workspace"),
        ({"workspace": 0}, "workspace"),
        ({"workspace": True}, "workspace"),
        ({"workspace": "a\x00b"}, "workspace"),
        ({"workspace": ["research"]}, "workspace"),
        ({"owner": "ops"}, "owner"),  # an unknown field: refused, never ignored
        ({"events": ["experiment.finished"]}, "events"),
        ({"events": []}, "events"),
        ({"format": "teams"}, "format"),
        ({"secret": "short"}, "secret"),
        ({"enabled": "yes"}, "enabled"),
        ({"name": ""}, "name"),
        ({"url": 12}, "url"),
        ({"url": "ftp://93.184.215.14/x"}, "url"),
        ({"url": "https://user:pw@93.184.215.14/x"}, "url"),
    ],
)
def test_invalid_input_is_a_400_naming_the_field(admin, fields, field):
    answer = _create(admin, **fields)
    assert answer.status_code == 400, answer.content
    # A list item is named by its index (``events.0``).
    assert [key.split(".")[0] for key in answer.json()["errors"]] == [field], answer.json()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://[::1]/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
        "http://0.0.0.0/hook",
    ],
)
def test_private_and_loopback_targets_are_refused_naming_url(admin, url):
    answer = _create(admin, url=url)
    assert answer.status_code == 400, answer.content
    assert list(answer.json()["errors"]) == ["url"]
    assert "address the master does not call" in str(answer.json()["errors"]["url"])


def test_the_admins_endpoint_list_allows_a_private_target(admin, settings):
    settings.HEADWAY_WEBHOOK_ENDPOINTS = ["http://127.0.0.1:8080"]
    assert _create(admin, url="http://127.0.0.1:8080/hook").status_code == 201
    # Another port of the same host is still refused.
    assert _create(admin, name="b", url="http://127.0.0.1:8081/hook").status_code == 400


def test_a_duplicate_name_is_a_400_naming_name(admin):
    assert _create(admin).status_code == 201
    answer = _create(admin)
    assert answer.status_code == 400 and "name" in answer.json()["errors"]


def test_a_patch_is_validated_too(admin):
    hook_id = _create(admin).json()["id"]
    for fields, field in (
        ({"url": "http://10.0.0.1/"}, "url"),
        ({"workspace": "nope"}, "workspace"),
    ):
        answer = admin.patch(f"{URL}{hook_id}/", fields, format="json")
        assert answer.status_code == 400 and field in answer.json()["errors"], answer.content
    assert Webhook.objects.get(id=hook_id).url == PUBLIC


def test_deliveries_limit_is_validated(admin):
    hook_id = _create(admin).json()["id"]
    for value in ("0", "501", "x"):
        answer = admin.get(f"{URL}{hook_id}/deliveries/?limit={value}")
        assert answer.status_code == 400 and "limit" in answer.json()["errors"]
    answer = admin.get(f"{URL}{hook_id}/deliveries/?since=1")
    assert answer.status_code == 400 and "since" in answer.json()["errors"]
    assert not Delivery.objects.exists()


def test_unknown_ids_are_404(admin):
    assert admin.get(f"{URL}99999/").status_code == 404
    assert admin.get(f"{URL}99999/deliveries/").status_code == 404
    assert admin.post(f"{URL}99999/test/").status_code == 404


def test_the_test_action_makes_its_first_attempt_at_once(admin, settings):
    """Claim, signed POST and finish in the request, on whichever database the suite runs
    (SQLite has no row locks: the conditional UPDATE decides the claim)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from webhooks.signing import verify

    seen: list[tuple[str, bool]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            signed = verify("t" * 20, body, self.headers["Headway-Signature"])
            seen.append((self.headers["Headway-Event-Type"], signed))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        settings.HEADWAY_WEBHOOK_ENDPOINTS = [origin]
        hook_id = _create(admin, url=f"{origin}/hook", secret="t" * 20).json()["id"]
        answer = admin.post(f"{URL}{hook_id}/test/")
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert (body["state"], body["attempts"], body["last_status_code"]) == ("DELIVERED", 1, 204)
        assert seen == [("webhook.test", True)]
        again = admin.post(f"{URL}{hook_id}/test/").json()  # a new event, a new delivery
        assert again["event_id"] != body["event_id"] and len(seen) == 2
    finally:
        server.shutdown()
        server.server_close()


def test_a_workspace_filter_by_name_or_id_shown_changed_and_cleared(admin):
    from registry.models import Workspace

    research = Workspace.objects.create(name="research")
    vision = Workspace.objects.create(name="vision")
    created = _create(admin, workspace="research")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["workspace"], body["workspace_id"]) == ("research", research.id)
    hook_id = body["id"]
    assert Webhook.objects.get(id=hook_id).workspace_id == research.id
    changed = admin.patch(f"{URL}{hook_id}/", {"workspace": vision.id}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["workspace"], changed.json()["workspace_id"]) == ("vision", vision.id)
    (listed,) = admin.get(URL).json()["webhooks"]
    assert (listed["workspace"], listed["workspace_id"]) == ("vision", vision.id)
    cleared = admin.patch(f"{URL}{hook_id}/", {"workspace": None}, format="json")
    assert cleared.status_code == 200, cleared.content
    assert (cleared.json()["workspace"], cleared.json()["workspace_id"]) == (None, None)
    assert Webhook.objects.get(id=hook_id).workspace_id is None
    unfiltered = _create(admin, name="all").json()
    assert (unfiltered["workspace"], unfiltered["workspace_id"]) == (None, None)
