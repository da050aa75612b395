"""``headway pool list`` against a real registry (pytest-django's live server): the pools of the
admin's file with the hosts, slots and queued runs the registry counts."""

from __future__ import annotations

import contextlib
import json

import pytest

from headway.cli.main import main
from registry import scheduling
from registry.models import TrialRun
from tests.helpers import TINY_CONFIG, TINY_MODEL, b64, register_host

POOLS = "- {name: default, type: agent}\n- {name: big, type: agent, description: wide hosts}\n"


@pytest.fixture
def server(live_server, transactional_db, django_user_model, monkeypatch, tmp_path, settings):
    """The live server's URL with the pools ``default`` and ``big``; $HEADWAY_TOKEN is a user's."""
    from rest_framework.authtoken.models import Token

    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS)
    settings.HEADWAY_RESOURCE_POOLS = str(pools)
    user = django_user_model.objects.create_user("dana", password="pw-dana")
    monkeypatch.setenv("HEADWAY_TOKEN", Token.objects.create(user=user).key)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url


def _submit(server: str, pool: str) -> None:
    import os

    import requests

    config = TINY_CONFIG + f"resources: {{resource_pool: {pool}}}\n"
    answer = requests.post(
        f"{server}/api/v1/experiments/",
        json={"config": config, "model_definition": b64(TINY_MODEL)},
        headers={"Authorization": f"Token {os.environ['HEADWAY_TOKEN']}"},
        timeout=60,
    )
    assert answer.status_code == 201, answer.text


@pytest.fixture
def purge_host_queues():
    """Names of host queues to empty at the end: placed runs' tasks go there, and no worker
    of this test takes them."""
    queues: list[str] = []
    yield queues
    from config.celery import app

    with app.connection_for_write() as connection:
        for queue in queues:
            with contextlib.suppress(Exception):  # the queue was never declared: nothing to purge
                connection.default_channel.queue_purge(queue)


def test_pool_list_prints_each_pool_with_its_counts(server, capsys, purge_host_queues):
    for name in ("big-a", "big-b"):
        purge_host_queues.append(register_host(name, 1, pool="big").queue)
    for _ in range(3):
        _submit(server, "big")
    scheduling.place_queued_runs()  # one on each of big's hosts; the third waits
    assert TrialRun.objects.filter(pool="big", host__isnull=False).count() == 2

    assert main(["--master", server, "pool", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "pool",
        "type",
        "hosts",
        "slots",
        "in",
        "use",
        "queued",
        "description",
    ]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == ["default", "big"]  # the file's order
    assert rows["big"] == ["big", "agent", "2", "2", "2", "1", "wide", "hosts"]
    assert rows["default"] == ["default", "agent", "0", "0", "0", "0", "-"]

    assert main(["--master", server, "pool", "list", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["slots_in_use"], p["queued_runs"]) for p in answer] == [
        ("default", 0, 0),
        ("big", 2, 1),
    ]


def test_pool_list_without_credentials_says_so(server, capsys, monkeypatch):
    monkeypatch.setenv("HEADWAY_TOKEN", "not-a-token")
    assert main(["--master", server, "pool", "list"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip()


def test_pool_list_shows_excluded_slurm_nodes_and_an_admin_enables_one(
    server, capsys, settings, tmp_path, django_user_model
):
    from django.utils import timezone

    from registry.pools.slurm.models import SlurmNode

    pools = tmp_path / "slurm-pools.yaml"
    pools.write_text("- {name: hpc, type: slurm, partition: debug}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)
    reason = "excluded automatically: 3 runs in a row were lost on it before their ranks started"
    SlurmNode.objects.create(
        namespace=settings.CELERY_TASK_DEFAULT_QUEUE,
        pool="hpc",
        name="n7",
        failed_starts=3,
        excluded_reason=reason,
        excluded_at=timezone.now(),
    )
    assert main(["--master", server, "pool", "list"]) == 0
    assert f"hpc: node n7 {reason}" in capsys.readouterr().out.splitlines()

    assert main(["--master", server, "pool", "enable-node", "hpc", "n7"]) == 1
    assert "Only an admin may enable a pool's node." in capsys.readouterr().err
    dana = django_user_model.objects.get(username="dana")
    dana.is_staff = True
    dana.save()  # (a signal drops the token's cached user)
    assert main(["--master", server, "pool", "enable-node", "hpc", "n7"]) == 0
    assert capsys.readouterr().out.strip() == (
        "Node n7 of pool hpc: Headway's jobs may run there again"
    )
    assert SlurmNode.objects.get(name="n7").excluded_reason == ""
    assert main(["--master", server, "pool", "enable-node", "hpc", "n8"]) == 1
    assert "no Slurm node n8" in capsys.readouterr().err


def test_pool_list_shows_a_ray_pools_cluster_and_why_its_jobs_wait(
    server, capsys, settings, tmp_path
):
    from registry.pools.ray.models import RayPoolState

    pools = tmp_path / "ray-pools.yaml"
    pools.write_text("- {name: ray, type: ray, address: 'http://ray-head:8265'}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)
    RayPoolState.objects.create(
        namespace=settings.CELERY_TASK_DEFAULT_QUEUE, pool="ray", nodes=3, slots=6
    )
    assert main(["--master", server, "pool", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "ray: cluster of 3 node(s), 6 slot(s); jobs 0 pending, 0 running" in lines
    RayPoolState.objects.update(error="the Ray dashboard at http://ray-head:8265 did not answer")
    assert main(["--master", server, "pool", "list"]) == 0
    assert "ray: cluster did not answer: the Ray dashboard" in capsys.readouterr().out
