"""Shared fixtures that start real processes (registered by the root conftest.py): the
session's web server and Celery worker cluster with its tokens, an in-process host agent, and a
real Ray cluster in network namespaces."""

from __future__ import annotations

import os
import subprocess
import types
import uuid

import pytest

from tests.helpers import REPO, require
from tests.helpers_cluster import ClusterAPI


def _redis_ok(url: str) -> bool:
    if not url:
        return False
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=2).ping())
    except Exception:
        return False


# What the cluster's master (the live server in this process and its master worker) and its
# hosts run with: heartbeats every 0.5 s, so a transactional test's flush of the host rows is
# repaired at once; a short kill grace; the lease and margins that follow from them.
CLUSTER_TIMING = {
    "HEADWAY_HOST_HEARTBEAT_SECONDS": 0.5,
    "HEADWAY_KILL_GRACE_SECONDS": 3.0,
    "HEADWAY_LEASE_SECONDS": 10.0,
    "HEADWAY_LEASE_MARGIN_SECONDS": 8.0,
    "HEADWAY_HOST_TIMEOUT_SECONDS": 5.5,
    # A lost task message is sent again after 20 s, not the default 2 min: a duplicate is
    # harmless (the claim lets one delivery in), and the lost-message test waits this long.
    "HEADWAY_DISPATCH_TIMEOUT_SECONDS": 20.0,
}


@pytest.fixture(scope="session")
def cluster(django_db_setup, django_db_blocker, live_server, tmp_path_factory):
    """A real Headway cluster: the live web server, the master's Celery worker (reaper, beat)
    and one host agent (REST only, a host token, no database settings) on Redis + Postgres.

    Yields a namespace with ``url`` (master URL), ``queue`` (the namespace), ``host`` and
    ``host_token`` (the agent's; ``cluster_token`` creates it again after each flush, and
    starts the agent again, ``start_agent()``, when a revocation made it exit: ``agent``),
    ``checkpoint_dir``, ``worker_log`` and ``env`` (the master's environment, database
    included: ``tests.helpers.start_worker`` strips it for other hosts).
    """
    from django.conf import settings

    from registry.management.services import master_worker_command
    from tests.helpers import host_token, start_worker

    db = settings.DATABASES["default"]
    require(
        db["ENGINE"].endswith("postgresql"),
        "integration tests need PostgreSQL: set DATABASE_URL=postgres://...",
    )
    require(
        _redis_ok(settings.REDIS_URL), "integration tests need Redis: set REDIS_URL=redis://..."
    )
    base = tmp_path_factory.mktemp("cluster")
    queue = f"headway-test-{uuid.uuid4().hex[:10]}"
    checkpoint_dir = base / "checkpoints"
    work_dir = base / "work"
    # The live server runs in this process: point its settings where the worker writes (the
    # queue is set per test by `cluster_token`, so other tests' runs never reach this worker).
    settings.HEADWAY_CHECKPOINT_DIR = checkpoint_dir
    settings.HEADWAY_WORK_DIR = work_dir
    settings.HEADWAY_MASTER_URL = live_server.url
    for name, value in CLUSTER_TIMING.items():
        setattr(settings, name, value)
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    env = dict(
        os.environ,
        DATABASE_URL=f"postgres://{user}{password}@{host}:{port}/{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        HEADWAY_QUEUE=queue,
        HEADWAY_MASTER_URL=live_server.url,
        HEADWAY_CHECKPOINT_DIR=str(checkpoint_dir),
        HEADWAY_WORK_DIR=str(work_dir),
        HEADWAY_VAR_DIR=str(base / "var"),
        HEADWAY_LOG_FLUSH_SECONDS="0.2",
        # Two trials at once on each worker's host.
        HEADWAY_SLOTS="2",
        **{name: f"{value:g}" for name, value in CLUSTER_TIMING.items()},
    )
    worker_log = base / "worker.log"
    # A host name of its own: workers other tests start from `env` keep the default name.
    host_name = f"cluster-{queue}"
    with django_db_blocker.unblock():
        key = host_token(host_name)
    with open(base / "master.log", "wb") as log:
        master = subprocess.Popen(
            [*master_worker_command(queue), "-n", f"master-{queue}@%h"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def start_agent() -> subprocess.Popen:
        return start_worker(
            dict(env, HEADWAY_HOST_NAME=host_name), worker_log, queue, host_name, 3, token=key
        )

    agent = start_agent()
    # The hosts call the live server between tests too (heartbeats): it keeps database access
    # for the session, as the workers that opened the database themselves had. Without it a
    # call cut off mid-pass by the blocker left the placement lock held by a dead request.
    found = types.SimpleNamespace(
        url=live_server.url,
        queue=queue,
        host=host_name,
        host_token=key,
        checkpoint_dir=checkpoint_dir,
        worker_log=worker_log,
        env=env,
        agent=agent,
        start_agent=start_agent,
        revocations_seen=0,
    )
    unblocked = django_db_blocker.unblock()
    unblocked.__enter__()
    try:
        yield found
    finally:
        unblocked.__exit__(None, None, None)
        agent = found.agent
        for proc in (agent, master):
            proc.terminate()
        for proc in (agent, master):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def cluster_token(cluster, transactional_db, django_user_model, settings):
    """A user token valid on the cluster's live server; runs created meanwhile go to its worker
    (whose host token this creates again: the last test's flush deleted it)."""
    from rest_framework.authtoken.models import Token

    from tests.helpers import host_token

    settings.CELERY_TASK_DEFAULT_QUEUE = cluster.queue
    host_token(cluster.host, cluster.host_token)
    # Another test revoked this host's token (its agent exits once its trials stopped, as it
    # must): the agent is started again, with the token live again.
    revocations = cluster.worker_log.read_text(errors="replace").count("host token revoked")
    if revocations > cluster.revocations_seen:
        cluster.revocations_seen = revocations
        try:
            cluster.agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            cluster.agent.kill()
            cluster.agent.wait()
    if cluster.agent.poll() is not None:
        cluster.agent = cluster.start_agent()
    user = django_user_model.objects.create_user("researcher", password="researcher-password")
    return Token.objects.create(user=user).key


@pytest.fixture
def cluster_api(cluster, cluster_token) -> ClusterAPI:
    return ClusterAPI(cluster.url, cluster_token)


@pytest.fixture
def host_agent(live_server, transactional_db, settings, tmp_path, monkeypatch):
    """This test process as a worker host of the live server, for in-process host agent tests
    (``workers.runner``, ``workers.leases`` ...): the agent's settings (``workers.config``)
    point at the live server with a fresh host token for host ``agent-<hex>``, its work dir
    under ``tmp_path``, fast log flushes; restored afterwards. The host is not registered:
    ``agent.register(slots)`` does it (a heartbeat over REST, so runs can be placed on it).

    Yields a namespace with ``name``, ``token``, ``url``, ``work_dir``, ``api`` (the host's
    ``RegistryAPI``) and ``register``.
    """
    from headway.client import RegistryAPI
    from tests.helpers import host_token
    from workers import config

    name = f"agent-{uuid.uuid4().hex[:8]}"
    key = host_token(name)
    saved = dict(config.settings.__dict__)
    config.configure(
        HEADWAY_MASTER_URL=live_server.url,
        HEADWAY_HOST_TOKEN=key,
        HEADWAY_HOST_NAME=name,
        HEADWAY_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE,
        HEADWAY_WORK_DIR=tmp_path / "work",
        HEADWAY_LOG_FLUSH_SECONDS=0.05,
        HEADWAY_THREADS_PER_SLOT=0,
        HEADWAY_SLOTS=1,
    )
    config.settings.VAR_DIR = tmp_path / "var"  # an agent's state file (workers.agent_state)
    monkeypatch.delenv("HEADWAY_KEEP_WORKDIRS", raising=False)
    settings.HEADWAY_MASTER_URL = live_server.url
    api = RegistryAPI(live_server.url, key)
    api.session.max_retries = 0

    def register(slots: int = 1, gpu: bool = False):
        from django.utils import timezone

        devices = [str(i) if gpu else f"cpu{i}" for i in range(slots)]
        return api.host_heartbeat(
            pool=config.settings.HEADWAY_RESOURCE_POOL,
            devices=devices,
            gpu=gpu,
            started_at=timezone.now(),
        )

    try:
        yield types.SimpleNamespace(
            name=name,
            token=key,
            url=live_server.url,
            work_dir=tmp_path / "work",
            api=api,
            register=register,
        )
    finally:
        config.settings.__dict__.update(saved)
        from workers import agent_state

        agent_state.reset()  # hosts.start() claimed an identity in this process


@pytest.fixture
def fresh_supervision(monkeypatch):
    """The worker's supervision state (running processes, shutdown flag), empty for this test."""
    import threading

    from workers import supervision

    monkeypatch.setattr(supervision, "_active", {})
    monkeypatch.setattr(supervision, "shutting_down", threading.Event())


@pytest.fixture(scope="module")
def ray_cluster():
    """A real Ray cluster for the module: a head and two workers of 2 CPUs, each node in its own
    network namespace on its own address (``tests.helpers_ray.ray_cluster``)."""
    from tests.helpers_ray import ray_cluster as start_ray_cluster

    with start_ray_cluster() as cluster:
        yield cluster
