"""Workspaces -> project -> experiments in the dashboard: the pages render, link to each other,
and a project's page is the experiment list of that project only (its filters and sort kept)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.models import DEFAULT_NAME, Experiment, default_project
from registry.workspaces import project_create, workspace_create
from tests.helpers import DASHBOARD_CONFIG

pytestmark = pytest.mark.django_db


@pytest.fixture
def place(alice):
    workspace = workspace_create(owner=alice, name="team")
    project = project_create(
        owner=alice, workspace_id=workspace.id, name="vision", description="Image models"
    )
    return workspace, project


def _experiment(owner, name: str, project=None) -> Experiment:
    fields = {"project": project} if project is not None else {}
    return Experiment.objects.create(
        owner=owner, name=name, config=DASHBOARD_CONFIG, model_definition=b"", **fields
    )


def test_it_navigates_from_workspaces_to_a_projects_experiments(client_alice, alice, place):
    workspace, project = place
    inside = _experiment(alice, "inside-exp", project)
    _experiment(alice, "outside-exp")

    page = client_alice.get(reverse("dashboard:workspaces")).content.decode()
    assert DEFAULT_NAME in page and "team" in page
    workspace_url = reverse("dashboard:workspace", args=[workspace.id])
    assert f'href="{workspace_url}"' in page

    page = client_alice.get(workspace_url).content.decode()
    project_url = reverse("dashboard:project", args=[project.id])
    assert f'href="{project_url}"' in page and "vision" in page and "Image models" in page

    response = client_alice.get(project_url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "inside-exp" in page and "outside-exp" not in page
    assert 'aria-label="Breadcrumb"' in page and f'href="{workspace_url}"' in page
    assert reverse("dashboard:experiment", args=[inside.id]) in page
    # The experiment's page leads back: its crumbs link the workspace and the project.
    page = client_alice.get(reverse("dashboard:experiment", args=[inside.id])).content.decode()
    assert f'href="{workspace_url}"' in page and f'href="{project_url}"' in page
    # The list's own filters and sort still apply on a project's page, and stay on it.
    page = client_alice.get(project_url + "?name=nothing-like-it&sort=name").content.decode()
    assert "inside-exp" not in page and f'href="{project_url}"' in page


def test_the_list_filters_by_workspace_and_project_ids(client_alice, alice, place):
    workspace, project = place
    _experiment(alice, "inside-exp", project)
    _experiment(alice, "outside-exp")
    page = client_alice.get(f"/?workspace={workspace.id}").content.decode()
    assert "inside-exp" in page and "outside-exp" not in page and "Experiments in team" in page
    page = client_alice.get(f"/?project={default_project().id}").content.decode()
    assert "outside-exp" in page and "inside-exp" not in page
    # An unknown id is reported and ignored, as the list's other filters are.
    response = client_alice.get("/?project=99999999")
    assert response.status_code == 200 and "inside-exp" in response.content.decode()


def test_unknown_pages_are_404_and_archived_ones_are_marked(client_alice, alice, place):
    workspace, _ = place
    assert client_alice.get(reverse("dashboard:project", args=[999999])).status_code == 404
    assert client_alice.get(reverse("dashboard:workspace", args=[999999])).status_code == 404
    workspace.archived = True
    workspace.save()
    assert "team" not in client_alice.get(reverse("dashboard:workspaces")).content.decode()
    page = client_alice.get(reverse("dashboard:workspaces") + "?archived=on").content.decode()
    assert "team" in page and "archived" in page


def test_pages_need_a_login(client, place):
    workspace, project = place
    for url in (
        reverse("dashboard:workspaces"),
        reverse("dashboard:workspace", args=[workspace.id]),
        reverse("dashboard:project", args=[project.id]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "login" in response["Location"]
