"""The Workers page's host controls: admins drain, disable, enable and remove hosts with
CSRF-protected POSTs; everyone else sees no control and gets 403."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from registry import scheduling
from registry.models import TrialRun, WorkerHost
from tests.helpers import create_experiment, register_host, start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("root", is_staff=True)


def _url(name: str, action: str) -> str:
    return reverse("dashboard:host-control", args=[name, action])


def test_only_admins_see_the_controls_and_may_post_them(client, user, staff):
    register_host("gpu-a", 1)
    client.force_login(user)
    html = client.get(reverse("dashboard:workers")).content.decode()
    assert _url("gpu-a", "drain") not in html
    assert client.post(_url("gpu-a", "disable")).status_code == 403
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "enabled"
    client.force_login(staff)
    html = client.get(reverse("dashboard:workers")).content.decode()
    for action in ("drain", "disable", "remove"):
        assert f'action="{_url("gpu-a", action)}"' in html
    assert _url("gpu-a", "enable") not in html  # enabled already


def test_an_admin_drains_then_enables_a_host_with_csrf(staff):
    register_host("gpu-a", 1)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(staff)
    assert strict.post(_url("gpu-a", "drain")).status_code == 403  # no CSRF token
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "enabled"
    strict.get(reverse("dashboard:workers"))
    token = strict.cookies["csrftoken"].value
    page = strict.post(_url("gpu-a", "drain"), {"csrfmiddlewaretoken": token}, follow=True)
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "draining"
    html = page.content.decode()
    assert "Host gpu-a: draining" in html and "host-admin-state" in html
    assert f'action="{_url("gpu-a", "enable")}"' in html
    strict.post(_url("gpu-a", "enable"), {"csrfmiddlewaretoken": token})
    assert WorkerHost.objects.get(name="gpu-a").admin_state == "enabled"


def test_removing_a_busy_host_says_which_runs_hold_it(client, api, staff):
    register_host("gpu-a", 1)
    run = TrialRun.objects.get(trial__experiment_id=create_experiment(api).json()["id"])
    scheduling.place_queued_runs()
    start_run(run.trial)
    client.force_login(staff)
    page = client.post(_url("gpu-a", "remove"), follow=True)
    assert f"trial {run.trial_id} run 1" in page.content.decode()
    assert WorkerHost.objects.filter(name="gpu-a").exists()
    assert client.post(_url("gpu-a", "reboot")).status_code == 404


def test_the_page_says_why_the_master_drained_a_host(client, user):
    register_host("gpu-a", 1)
    reason = "drained automatically: 3 runs in a row were lost on it before their ranks started"
    WorkerHost.objects.filter(name="gpu-a").update(admin_state="draining", admin_reason=reason)
    client.force_login(user)
    html = client.get(reverse("dashboard:workers")).content.decode()
    assert f'<div class="muted host-admin-reason">{reason}</div>' in html
