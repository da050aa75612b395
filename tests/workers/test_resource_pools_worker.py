"""A worker host joins one resource pool (``HEADWAY_RESOURCE_POOL``): one the admin's file does
not list stops the worker at start, naming the variable and the known pools."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests.helpers import REPO, require

POOLS = "- {name: big, type: agent}\n"


@pytest.fixture
def env(tmp_path):
    """The environment of a worker whose pool is not in the admin's file (``big``, ``default``)."""
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS)
    return dict(
        os.environ,
        SECRET_KEY=os.environ.get("SECRET_KEY", "x"),
        HEADWAY_RESOURCE_POOLS=str(pools),
        HEADWAY_RESOURCE_POOL="huge",
        HEADWAY_QUEUE=f"pools-{uuid.uuid4().hex[:8]}",
        HEADWAY_HOST_NAME=f"pools-{uuid.uuid4().hex[:8]}",
        HEADWAY_SLOTS="1",
        HEADWAY_VAR_DIR=str(tmp_path / "var"),
    )


EXPECTED = "HEADWAY_RESOURCE_POOL='huge' is not a resource pool; the resource pools: default, big"


def test_manage_py_worker_refuses_an_unknown_pool(env):
    done = subprocess.run(
        [sys.executable, "manage.py", "worker"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert EXPECTED in done.stderr
    assert "celery" not in done.stdout  # it never became a Celery worker


@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_with_an_unknown_pool_stops_by_itself(env, tmp_path, settings):
    """Started as ``celery worker`` directly (as ``make serve`` and the tests do), the worker
    stops when it gets ready, before registering a host."""
    from registry.models import WorkerHost
    from workers.services import worker_command

    db = settings.DATABASES["default"]
    require(db["ENGINE"].endswith("postgresql"), "needs PostgreSQL: set DATABASE_URL")
    require(bool(settings.REDIS_URL), "needs Redis: set REDIS_URL")
    env["DATABASE_URL"] = (
        f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
        f"{db.get('PORT') or 5432}/{db['NAME']}"
    )
    command = worker_command(2, queue=env["HEADWAY_QUEUE"], host_name=env["HEADWAY_HOST_NAME"])
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    assert EXPECTED in done.stdout + done.stderr
    assert not WorkerHost.objects.filter(name=env["HEADWAY_HOST_NAME"]).exists()
