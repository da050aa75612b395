"""Security review finding: "SSRF: any user can make the registry send signed S3 requests, with its
access key id, to any host through ``checkpoint_storage.endpoint_url``".

A listening socket stands for the attacker's host: before the fix the registry sent it a signed
request (``Authorization: AWS4-HMAC-SHA256 Credential=<access key id>/...``) on a checkpoint
download. Endpoints now come from ``HEADWAY_STORAGE_ENDPOINTS``.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import ClassVar

import pytest

from tests.helpers import TINY_CONFIG, create_experiment, register_checkpoint
from tests.helpers_checkpoints import allow_storage

pytestmark = pytest.mark.django_db


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def _record(self) -> None:
        type(self).seen.append(dict(self.headers))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_PUT = do_POST = _record  # http.server's naming

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def attacker_host():
    """An HTTP server that records every request it gets; yields its URL and the records."""
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def _s3(endpoint: str) -> dict:
    return {"type": "s3", "bucket": "loot", "prefix": "x", "endpoint_url": endpoint}


def _with_storage(storage: dict) -> str:
    return TINY_CONFIG + "checkpoint_storage: " + json.dumps(storage) + "\n"


def test_finding_ssrf_storage_endpoint_outside_the_allow_list_is_refused_at_creation(
    api, attacker_host, settings
):
    from registry.models import Experiment

    settings.HEADWAY_STORAGE_ENDPOINTS = ["http://minio.internal:9000"]
    url, seen = attacker_host
    for endpoint in (url, "http://169.254.169.254/", "ftp://x", "http://u:p@minio.internal:9000"):
        response = create_experiment(api, config=_with_storage(_s3(endpoint)))
        assert response.status_code == 400, response.json()
        assert "config.checkpoint_storage.endpoint_url" in response.json()["errors"]
    assert not Experiment.objects.exists()
    assert seen == []


def test_finding_ssrf_stored_config_is_checked_again_before_the_registry_calls_it(
    api, attacker_host, settings, monkeypatch
):
    """A config stored before the allow-list (or before it shrank): the download is refused
    and the attacker's host receives nothing (no signed request, no access key id)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASERVERKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "server-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    url, seen = attacker_host
    settings.HEADWAY_STORAGE_ENDPOINTS = [url]  # allowed when the experiment was created
    response = create_experiment(api, config=_with_storage(allow_storage(_s3(url))))
    assert response.status_code == 201, response.json()
    from registry.models import Trial

    trial = Trial.objects.get(experiment_id=response.json()["id"])
    checkpoint = register_checkpoint(trial)
    settings.HEADWAY_STORAGE_ENDPOINTS = []  # the administrator removed it
    settings.HEADWAY_STORAGE_LOCATIONS.added.clear()  # and the location on it
    answer = api.get(f"/api/v1/checkpoints/{checkpoint.uuid}/download", {"path": "state-dict.pth"})
    assert answer.status_code == 400
    assert "checkpoint_storage.endpoint_url" in answer.json()["errors"]
    assert seen == []


def test_finding_ssrf_checkpoint_deletion_does_not_call_a_disallowed_endpoint(
    attacker_host, api, settings
):
    from registry.lifecycle import delete_checkpoint_files
    from registry.models import CheckpointState, Trial

    url, seen = attacker_host
    settings.HEADWAY_STORAGE_ENDPOINTS = [url]
    response = create_experiment(api, config=_with_storage(allow_storage(_s3(url))))
    trial = Trial.objects.get(experiment_id=response.json()["id"])
    checkpoint = register_checkpoint(trial)
    settings.HEADWAY_STORAGE_ENDPOINTS = []
    settings.HEADWAY_STORAGE_LOCATIONS.added.clear()
    type(checkpoint).objects.filter(pk=checkpoint.pk).update(state=CheckpointState.DELETING)
    deleted, failed = delete_checkpoint_files([checkpoint.uuid])
    assert deleted == [] and "endpoint_url" in failed[str(checkpoint.uuid)]
    assert seen == []


def test_finding_ssrf_allowed_endpoint_and_aws_default_are_accepted(api, s3_endpoint):
    """The allow-listed endpoint (moto here) and no endpoint at all (AWS) are accepted."""
    storage = allow_storage(_s3(s3_endpoint + "/"))
    assert create_experiment(api, config=_with_storage(storage)).status_code == 201
    no_endpoint = allow_storage({"type": "s3", "bucket": "aws-bucket"})
    answer = create_experiment(api, config=_with_storage(no_endpoint))
    assert answer.status_code == 201, answer.json()
