"""Shared fixtures of tests/ and e2e_tests/ (registered by the root conftest.py): moto S3, users
and tokens, storage locations, browsers (the process-starting ones: plugin_processes.py)."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.helpers_checkpoints import allow_storage


@pytest.fixture(scope="session", autouse=True)
def _unconsumed_queue(request):
    """Runs that tests enqueue go to a queue no demo/serve worker reads (the cluster fixture
    points its own worker at another queue). A no-op for SDK-only runs (``-p no:django``)."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings

    settings.CELERY_TASK_DEFAULT_QUEUE = "headway-tests-unconsumed"
    # Persistent connections would outlive the live server's requests and block dropping the
    # test database at the end of the session.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


@pytest.fixture(scope="session", autouse=True)
def _storage_locations(request, tmp_path_factory):
    """The admin's storage locations for the session (``helpers_checkpoints.TestStorageLocations``): the
    embedded default, pytest's temporary root and the buckets fixtures create. A no-op for
    SDK-only runs."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings

    from tests.helpers_checkpoints import TestStorageLocations

    settings.HEADWAY_STORAGE_LOCATIONS = TestStorageLocations(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _storage_locations_per_test(request, _storage_locations):
    """Buckets a test allowed (``helpers_checkpoints.allow_storage``) are the admin's for that test only."""
    if not request.config.pluginmanager.hasplugin("django"):
        yield
        return
    from django.conf import settings

    from tests.helpers_checkpoints import TestStorageLocations

    locations = getattr(settings, "HEADWAY_STORAGE_LOCATIONS", None)
    before = dict(locations.added) if isinstance(locations, TestStorageLocations) else None
    yield
    if before is not None:
        locations.added.clear()
        locations.added.update(before)


FLUSH_ATTEMPTS = 5


@pytest.fixture(scope="session", autouse=True)
def _flush_survives_deadlocks(request):
    """A transactional test's flush (one TRUNCATE of every table) can deadlock with a live
    worker's heartbeat, and PostgreSQL then aborts the flush; the flush is retried, as the
    cluster's workers outlive each test by design. A no-op for SDK-only runs."""
    if not request.config.pluginmanager.hasplugin("django"):
        yield
        return
    from django.core.management.base import CommandError
    from django.core.management.commands import flush

    original = flush.Command.handle

    def handle(self, **options):
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return original(self, **options)
            except CommandError as exc:
                if attempt == FLUSH_ATTEMPTS or "deadlock detected" not in str(exc.__cause__):
                    raise
                time.sleep(0.1 * attempt)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush.Command, "handle", handle)
        yield


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing(request):
    """Test users' passwords need no brute-force resistance: the default hasher's iterations
    cost seconds per user on a loaded CI machine. A no-op for SDK-only runs."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from django.conf import settings
    from django.contrib.auth import hashers

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.fixture(scope="session")
def _moto_server():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_endpoint(_moto_server, monkeypatch, request) -> str:
    """A real S3 endpoint over HTTP (moto's server mode) with test credentials in the env, and
    allowed as a storage endpoint (``HEADWAY_STORAGE_ENDPOINTS``) in this process's settings
    and environment (workers started from ``os.environ`` inherit it)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("HEADWAY_STORAGE_ENDPOINTS", _moto_server)
    if request.config.pluginmanager.hasplugin("django"):
        from django.conf import settings

        monkeypatch.setattr(settings, "HEADWAY_STORAGE_ENDPOINTS", [_moto_server], raising=False)
    return _moto_server


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def api(user):
    """DRF test client authenticated with alice's token."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    client.token = token.key
    return client


@pytest.fixture
def unmanaged_client(api, live_server, monkeypatch):
    """alice's ``headway.client.RegistryAPI`` of the live registry, as a script run outside the
    cluster has it: no managed trial around this process, no system metrics."""
    from headway.client import RegistryAPI

    monkeypatch.delenv("HEADWAY_CLUSTER_INFO", raising=False)
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    user_api = RegistryAPI(live_server.url, api.token)
    yield user_api
    user_api.session._http.close()  # its keep-alive connection ends while the database is up


@pytest.fixture
def trial(api):
    """A new single-trial experiment's trial, its first run QUEUED (on no worker's queue)."""
    from registry.models import Trial
    from tests.helpers import create_experiment

    return Trial.objects.get(experiment_id=create_experiment(api).json()["id"])


@pytest.fixture
def chromium(monkeypatch):
    """A launched headless Chromium ``Browser`` (``tests/browser.py``)."""
    from tests.browser import launch_chromium

    with launch_chromium(monkeypatch) as browser:
        yield browser


@pytest.fixture
def alice(db):
    """A dashboard user (password ``pw-alice``)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("alice", password="pw-alice")


@pytest.fixture
def client_alice(client, alice):
    """Django's test client with ``alice`` logged in."""
    client.force_login(alice)
    return client


@pytest.fixture(params=["shared_fs", "s3"])
def checkpoint_storage(request, tmp_path) -> dict:
    """A ``checkpoint_storage`` config: a shared_fs folder, or a new bucket on the moto server."""
    if request.param == "shared_fs":
        return {"type": "shared_fs", "host_path": str(tmp_path)}
    from headway.storage import build_storage_manager

    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"ckpt-{uuid.uuid4().hex[:8]}"
    config = {"type": "s3", "bucket": bucket, "prefix": "runs", "endpoint_url": endpoint}
    build_storage_manager(config)._client.create_bucket(Bucket=bucket)
    return allow_storage(config)
