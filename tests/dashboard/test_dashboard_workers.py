"""The dashboard's Workers page: hosts, their slots, and what runs where."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry import scheduling
from registry.models import TrialRun
from tests.helpers import create_experiment, register_host, start_run

pytestmark = pytest.mark.django_db


def test_it_shows_each_host_and_the_runs_placed_on_it(client, api, user, settings):
    for name, slots in (("gpu-a", 2), ("idle-b", 1)):
        register_host(name, slots, gpu=True)
    scheduling.host_stopped(name="idle-b")
    run = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()
    start_run(run.trial)
    client.force_login(user)
    page = client.get(reverse("dashboard:workers"))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="host-gpu-a"' in html and "1 / 2" in html and "alive" in html
    experiment_url = reverse("dashboard:experiment", args=[run.trial.experiment_id])
    assert f'href="{experiment_url}#trial-{run.trial_id}"' in html
    assert "running" in html and "devices 0" in html
    assert 'id="host-idle-b"' in html and "stopped" in html and "idle" in html
    assert (
        reverse("dashboard:workers")
        in client.get(reverse("dashboard:experiments")).content.decode()
    )


def test_it_says_how_to_start_a_worker_when_none_registered(client, user):
    client.force_login(user)
    html = client.get(reverse("dashboard:workers")).content.decode()
    assert "No worker host has registered yet" in html and "manage.py worker" in html


def test_it_needs_a_login(client):
    response = client.get(reverse("dashboard:workers"))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_experiment_page_says_why_a_trial_waits(client, api, user):
    experiment_id = create_experiment(api).json()["id"]
    scheduling.place_queued_runs()  # no host in this pool
    client.force_login(user)
    html = client.get(reverse("dashboard:experiment", args=[experiment_id])).content.decode()
    assert scheduling.NO_HOSTS in html
