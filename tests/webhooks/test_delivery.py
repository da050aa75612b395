"""Deliveries end to end: a real receiver on loopback (``http.server`` in a thread), the
master's real Celery worker (with its beat: the sweep), PostgreSQL and Redis. The receiver
checks each signature with the snippet docs/webhooks.md gives receivers; a webhook filtered
to a workspace receives that workspace's events only."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings as django_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import lifecycle
from registry.workspaces import project_create, workspace_create
from tests.helpers import (
    REPO,
    queued_experiment,
    require,
    start_master_worker,
    stop_workers,
    wait_for,
)
from webhooks.delivery import claim, deliver, sweep
from webhooks.events import record
from webhooks.models import Delivery, DeliveryState, Webhook

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONFIG = "name: tiny\nentrypoint: python train.py\nsearcher: {name: single, metric: loss, max_length: 10}\n"
MAX_ATTEMPTS = 4


def _documented_verifier():
    """``verify_headway_signature`` as docs/webhooks.md prints it for receivers."""
    text = (REPO / "docs" / "webhooks.md").read_text()
    (code,) = re.findall(r"```python\n(.*?def verify_headway_signature.*?)```", text, re.S)
    scope: dict = {}
    exec(code, scope)
    return scope["verify_headway_signature"]


class Receiver:
    """A webhook receiver: answers 500 to the first ``fail_first`` requests of each event id
    (``fail_first=-1``: always), 200 after; records every request and its signature check."""

    def __init__(self, secret_of: dict[str, str]) -> None:
        self.requests: list[dict] = []
        self.fail_first: dict[str, int] = {}
        self.lock = threading.Lock()
        verify = _documented_verifier()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                name = self.path.strip("/")
                event_id = self.headers["Headway-Event-Id"]
                with receiver.lock:
                    seen = sum(1 for r in receiver.requests if r["event_id"] == event_id)
                    fail = receiver.fail_first.get(name, 0)
                    status = 500 if fail < 0 or seen < fail else 200
                    receiver.requests.append(
                        {
                            "hook": name,
                            "event_id": event_id,
                            "type": self.headers["Headway-Event-Type"],
                            "body": json.loads(body),
                            "verified": verify(
                                secret_of[name], body, self.headers["Headway-Signature"]
                            ),
                            "status": status,
                        }
                    )
                if name == "redirect":  # a receiver that sends the master elsewhere
                    self.send_response(302)
                    self.send_header("Location", f"{receiver.url}/redirected")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, hook: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["hook"] == hook]


SECRETS: dict[str, str] = {}


@pytest.fixture(scope="module")
def receiver():
    found = Receiver(SECRETS)
    yield found
    found.server.shutdown()
    found.server.server_close()


@pytest.fixture(scope="module")
def master_worker(django_db_setup, receiver, tmp_path_factory):
    """The master's Celery worker of a namespace of its own, with the receiver allowed
    (``HEADWAY_WEBHOOK_ENDPOINTS``), retries 0.2 s apart doubling, 4 attempts, a 1 s sweep."""
    import os

    db = django_settings.DATABASES["default"]
    require(db["ENGINE"].endswith("postgresql"), "needs PostgreSQL: set DATABASE_URL")
    require(django_settings.REDIS_URL.startswith("redis"), "needs Redis: set REDIS_URL")
    namespace = f"headway-webhooks-{uuid.uuid4().hex[:8]}"
    base = tmp_path_factory.mktemp("webhooks")
    user = db.get("USER") or "postgres"
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}",
        REDIS_URL=django_settings.REDIS_URL,
        HEADWAY_WEBHOOK_ENDPOINTS=receiver.url,
        HEADWAY_WEBHOOK_RETRY_SECONDS="0.2",
        HEADWAY_WEBHOOK_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        HEADWAY_WEBHOOK_TIMEOUT_SECONDS="5",
        HEADWAY_WEBHOOK_SWEEP_SECONDS="1",
    )
    worker = start_master_worker(env, base / "master.log", namespace)
    yield namespace
    stop_workers([worker])


@pytest.fixture
def admin(transactional_db, django_user_model, master_worker, receiver, settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = master_worker
    settings.HEADWAY_WEBHOOK_ENDPOINTS = [receiver.url]
    settings.HEADWAY_WEBHOOK_MAX_ATTEMPTS = MAX_ATTEMPTS
    settings.HEADWAY_WEBHOOK_RETRY_SECONDS = 0.2
    user = django_user_model.objects.create_user("ops", is_staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    client.user = user
    return client


def _hook(
    admin, receiver, name: str, fmt: str = "default", fail_first: int = 0, **fields
) -> Webhook:
    receiver.fail_first[name] = fail_first
    answer = admin.post(
        "/api/v1/webhooks/",
        {
            "name": name,
            "url": f"{receiver.url}/{name}",
            "events": ["experiment.state_changed", "trial.state_changed"],
            "format": fmt,
        }
        | fields,
        format="json",
    )
    assert answer.status_code == 201, answer.content
    SECRETS[name] = answer.json()["secret"]
    return Webhook.objects.get(id=answer.json()["id"])


def _settled(hook: Webhook) -> bool:
    rows = Delivery.objects.filter(webhook=hook)
    return (
        rows.exists()
        and not rows.exclude(state__in=(DeliveryState.DELIVERED, DeliveryState.FAILED)).exists()
    )


def test_events_are_delivered_signed_once_each(admin, receiver):
    hook = _hook(admin, receiver, "plain")
    experiment = queued_experiment(admin.user, CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    wait_for(lambda: _settled(hook), 60, "both deliveries")
    got = receiver.of("plain")
    assert sorted(r["type"] for r in got) == ["experiment.state_changed", "trial.state_changed"]
    assert all(r["verified"] for r in got), got
    assert all(r["body"]["id"] == r["event_id"] for r in got)
    rows = list(Delivery.objects.filter(webhook=hook))
    assert {(r.state, r.attempts, r.last_status_code) for r in rows} == {("DELIVERED", 1, 200)}
    # Delivered is final: neither a repeated task nor the sweep sends it again.
    for row in rows:
        assert deliver(row.pk) is None
    assert sweep() == 0
    assert len(receiver.of("plain")) == 2


def test_a_workspace_filtered_webhook_gets_its_workspaces_events_only(admin, receiver):
    experiments = {}
    for name in ("A", "B"):
        workspace = workspace_create(owner=admin.user, name=name)
        project_create(owner=admin.user, workspace_id=workspace.id, name="p")
        config = CONFIG + f"workspace: {name}\nproject: p\n"
        experiments[name] = queued_experiment(admin.user, config)
    only_a = _hook(admin, receiver, "only-a", workspace="A")
    every = _hook(admin, receiver, "every")
    for experiment in experiments.values():
        lifecycle.experiment_pause(experiment_id=experiment.id)
    wait_for(lambda: _settled(only_a) and _settled(every), 60, "the deliveries")
    # Both hooks' deliveries are settled: nothing more is on its way to either.
    assert Delivery.objects.filter(webhook=every).count() == 4

    def experiments_seen(hook: str) -> list[tuple[str, int]]:
        seen = []
        for request in receiver.of(hook):
            data = request["body"]["data"]
            owner = data["experiment"]["id"] if "experiment" in data else None
            seen.append((request["type"], owner or data["trial"]["experiment_id"]))
            assert request["verified"] and request["status"] == 200
        return sorted(seen)

    a, b = experiments["A"].id, experiments["B"].id
    assert experiments_seen("only-a") == [
        ("experiment.state_changed", a),
        ("trial.state_changed", a),
    ]
    assert experiments_seen("every") == sorted(
        (kind, e) for kind in ("experiment.state_changed", "trial.state_changed") for e in (a, b)
    )


def test_a_failing_receiver_is_retried_with_the_same_event_id_then_delivered(admin, receiver):
    hook = _hook(admin, receiver, "flaky", fail_first=MAX_ATTEMPTS - 1)
    experiment = queued_experiment(admin.user, CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    wait_for(lambda: _settled(hook), 60, "the retried deliveries")
    got = receiver.of("flaky")
    per_event = Counter(r["event_id"] for r in got)
    assert len(per_event) == 2 and set(per_event.values()) == {MAX_ATTEMPTS}
    ok = Counter(r["event_id"] for r in got if r["status"] == 200)
    assert ok == dict.fromkeys(per_event, 1)  # each event answered 2xx exactly once
    assert all(r["verified"] for r in got)
    for row in Delivery.objects.filter(webhook=hook):
        assert (row.state, row.attempts, row.last_status_code) == ("DELIVERED", MAX_ATTEMPTS, 200)
        assert row.delivered_at is not None and row.last_error == ""


def test_a_receiver_that_keeps_failing_is_given_up_on(admin, receiver):
    hook = _hook(admin, receiver, "down", fail_first=-1)
    experiment = queued_experiment(admin.user, CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    wait_for(lambda: _settled(hook), 60, "the deliveries to give up")
    for row in Delivery.objects.filter(webhook=hook):
        assert (row.state, row.attempts, row.last_status_code) == ("FAILED", MAX_ATTEMPTS, 500)
        assert row.last_error.startswith("HTTP 500")
    assert len(receiver.of("down")) == 2 * MAX_ATTEMPTS


def test_the_sweep_sends_an_event_whose_task_was_never_sent(admin, receiver):
    """As after a broker outage at commit time: the row is there, no task is; the beat's sweep
    (every second here) finds it due and sends it."""
    hook = _hook(admin, receiver, "outbox")
    (row,) = record("trial.state_changed", {"probe": 1}, only=hook, send=False)
    wait_for(lambda: _settled(hook), 60, "the sweep to deliver it")
    (got,) = receiver.of("outbox")
    assert got["event_id"] == str(row.event_id) and got["verified"]


def test_a_claimed_delivery_is_not_claimed_again(admin, receiver):
    hook = _hook(admin, receiver, "claims")
    (row,) = record("trial.state_changed", {"probe": 2}, only=hook, send=False)
    first = claim(row.pk)
    assert first is not None and first.state == DeliveryState.SENDING and first.attempts == 1
    assert claim(row.pk) is None  # a second worker (or a repeated task) gets nothing
    assert receiver.of("claims") == []


def test_slack_format_and_the_test_action(admin, receiver):
    hook = _hook(admin, receiver, "slack", fmt="slack")
    answer = admin.post(f"/api/v1/webhooks/{hook.id}/test/")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["state"], answer.json()["last_status_code"]) == ("DELIVERED", 200)
    (got,) = receiver.of("slack")
    assert got["type"] == "webhook.test" and got["verified"]
    assert got["body"] == {"text": "Test message from Headway for webhook slack"}
    deliveries = admin.get(f"/api/v1/webhooks/{hook.id}/deliveries/").json()["deliveries"]
    assert [d["event_id"] for d in deliveries] == [got["event_id"]]
    listed = admin.get("/api/v1/webhooks/").json()["webhooks"]
    assert listed[0]["last_delivery"]["state"] == "DELIVERED"


def test_a_redirect_is_a_failed_attempt_never_followed(admin, receiver):
    hook = _hook(admin, receiver, "redirect")
    answer = admin.post(f"/api/v1/webhooks/{hook.id}/test/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["state"], body["attempts"], body["last_status_code"]) == ("PENDING", 1, 302)
    assert body["last_error"].startswith("HTTP 302")
    assert receiver.of("redirected") == []
    Webhook.objects.filter(id=hook.id).delete()  # its retries find nothing to send
