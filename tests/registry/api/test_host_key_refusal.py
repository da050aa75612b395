"""How a refused host key is answered: an unknown key ("Invalid host token.", its agent keeps
trying) and a revoked one (``HOST_TOKEN_REVOKED``, its agent exits) are told apart from one
read of the token row, so a token issued while a beat with its key is in flight is never
answered as revoked (two reads, live then any, could see it appear between them)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.test import APIRequestFactory

from headway.client import wire
from registry.api.host_auth import HostTokenAuthentication
from registry.models import HostToken
from registry.models.host_token import hash_host_key
from tests.helpers import new_host_key

pytestmark = pytest.mark.django_db


def _authenticate(key: str):
    request = APIRequestFactory().post(
        "/api/v1/host-agent/heartbeat/", HTTP_AUTHORIZATION=f"Token {key}"
    )
    return HostTokenAuthentication().authenticate(request)


def _refusal(key: str) -> tuple[str, int]:
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.raises(AuthenticationFailed) as refused,
    ):
        _authenticate(key)
    token_reads = [q for q in queries.captured_queries if HostToken._meta.db_table in q["sql"]]
    return str(refused.value.detail), len(token_reads)


def test_unknown_and_revoked_keys_are_told_apart_by_one_read():
    key = new_host_key()
    assert _refusal(key) == ("Invalid host token.", 1)
    token = HostToken.objects.create(name="hk-1", key_hash=hash_host_key(key))
    assert _authenticate(key)[1].pk == token.pk
    HostToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    assert _refusal(key) == (wire.HOST_TOKEN_REVOKED, 1)
