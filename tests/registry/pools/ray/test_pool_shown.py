"""What a ray pool shows (``RayProvider.describe``, ``workers_section``): its jobs pending and
running with Ray's reasons, and its Ray cluster's capacity as the last poll saw it, over REST
and on the Workers page."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from registry import lifecycle
from registry.pools.ray.models import RayJob, RayPoolState
from tests.helpers import TINY_MODEL

pytestmark = pytest.mark.django_db


@pytest.fixture
def ray_pool(settings, tmp_path):
    pools = tmp_path / "pools.yaml"
    pools.write_text("- {name: ray, type: ray, address: 'http://ray-head:8265'}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)


@pytest.fixture
def waiting_job(user, ray_pool) -> RayJob:
    config = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
        "resources": {"resource_pool": "ray", "slots_per_trial": 4},
    }
    trial = lifecycle.experiment_create(
        owner=user, config_source=config, model_definition=TINY_MODEL
    ).trials.get()
    run = trial.runs.get()
    RayPoolState.objects.create(
        namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE, pool="ray", nodes=3, slots=6
    )
    return RayJob.objects.create(
        run=run,
        pool="ray",
        submission_id=f"headway-q-r{run.pk}",
        state="PLACING",
        reason="placement group PENDING (INFEASIBLE)",
    )


def test_the_pools_route_gives_the_clusters_capacity_and_rays_pending_reasons(api, waiting_job):
    pools = {p["name"]: p for p in api.get("/api/v1/resource-pools/").json()["results"]}
    ray = pools["ray"]
    assert (ray["type"], ray["jobs_pending"], ray["jobs_running"]) == ("ray", 1, 0)
    assert (ray["cluster_nodes"], ray["cluster_slots"], ray["cluster_error"]) == (3, 6, "")
    assert ray["pending_reasons"] == [
        f"{waiting_job.submission_id}: placement group PENDING (INFEASIBLE)"
    ]
    default = pools["default"]
    assert (default["cluster_nodes"], default["pending_reasons"]) == (None, [])


def test_the_workers_page_shows_the_cluster_and_each_jobs_reason(client, user, waiting_job):
    RayPoolState.objects.update(error="the Ray dashboard at http://ray-head:8265 did not answer")
    client.force_login(user)
    html = client.get(reverse("dashboard:workers")).content.decode()
    section = html[html.index('id="pool-ray"') :]
    assert "Each run is a Ray job:" in section and "1 pending, 0 running" in section
    assert "The Ray cluster did not answer" in section
    row = section[section.index(f'id="ray-job-{waiting_job.submission_id}"') :]
    assert "PLACING" in row and "placement group PENDING (INFEASIBLE)" in row
