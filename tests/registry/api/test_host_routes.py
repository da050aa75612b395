"""``registry.api.host_routes``: a host route declared as one row is served as the hand-written
views were: host tokens only, the body validated (400 naming the field), the handler called with
the host, the path's ids and the body's fields, its data answered through the wire model; a
media-type answer is bytes, ``None`` a 204; a handler without a summary and description is
refused at declaration."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.test import APIRequestFactory

from headway.client import wire
from registry.api.host_routes import HostRoute, host_view, on_run, on_share
from tests.host_api_helpers import issue_key

pytestmark = pytest.mark.django_db

calls: list[tuple] = []


class _Body(serializers.Serializer):
    worker = serializers.CharField()


def _claim(host: str, trial_id: int, run_id: int, *, worker: str) -> dict:
    """Claim something.

    A test handler: records its arguments."""
    calls.append((host, trial_id, run_id, worker))
    return {"claimed": True}


def _archive(host: str, trial_id: int, run_id: int, node_rank: int) -> bytes:
    """An archive.

    A test handler: answers bytes."""
    return f"{host}:{trial_id}:{run_id}:{node_rank}".encode()


def _stop(host: str) -> None:
    """Stop.

    A test handler: answers nothing."""


def _call(route: HostRoute, key: str, data=None, **ids):
    factory = APIRequestFactory()
    make = factory.post if route.method == "post" else factory.get
    request = make("/", data, format="json", HTTP_AUTHORIZATION=f"Token {key}")
    return host_view(route).as_view()(request, **ids)


def test_a_declared_route_serves_its_handler_to_host_tokens_only(user):
    route = on_run("claim/", "post", _claim, _Body, wire.Claim)
    assert route.name == "host-run-claim"
    assert route.path == "trials/<db_id:trial_id>/runs/<db_id:run_id>/claim/"
    assert (route.summary, route.description) == (
        "Claim something",
        "A test handler: records its arguments.",
    )
    key = issue_key("route-host")
    calls.clear()

    answer = _call(route, key, {"worker": "w1"}, trial_id=3, run_id=4)
    assert (answer.status_code, answer.data) == (200, {"claimed": True})
    assert calls == [("route-host", 3, 4, "w1")]

    refused = _call(route, key, {}, trial_id=3, run_id=4)
    assert refused.status_code == 400 and "worker" in refused.data["errors"]
    user_key = Token.objects.get_or_create(user=user)[0].key
    assert _call(route, user_key, {"worker": "w1"}, trial_id=3, run_id=4).status_code == 403
    assert calls == [("route-host", 3, 4, "w1")]


def test_media_type_and_no_content_answers():
    key = issue_key("route-host")
    archive = _call(
        on_share("a/", "get", _archive, None, "application/gzip"),
        key,
        trial_id=1,
        run_id=2,
        node_rank=3,
    )
    assert archive.status_code == 200
    assert archive["Content-Type"] == "application/gzip"
    assert archive.content == b"route-host:1:2:3"
    stopped = _call(HostRoute("s/", "host-s", "post", _stop), key)
    assert stopped.status_code == 204


def test_a_handler_without_summary_and_description_is_refused():
    def bare(host: str) -> None:
        """Only a summary."""

    with pytest.raises(ImproperlyConfigured, match="host-run-bare"):
        host_view(on_run("bare/", "post", bare))
