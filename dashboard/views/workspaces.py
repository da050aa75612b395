"""Workspaces and projects (``/workspaces/``, ``/workspaces/{id}/``): the way from a workspace
to a project to its experiments.

A project's page is the experiment list itself (``dashboard.views.experiments.experiment_list``
with the project fixed by the path), so it filters, sorts, pages and controls its experiments as
the list does. Every page requires login and runs a fixed number of queries.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from registry.models import Project, default_project
from registry.workspaces import readable_workspaces


@require_GET
@login_required
def workspace_list(request: HttpRequest) -> HttpResponse:
    """The workspaces where the user has a role, by name, with its project and experiment counts; archived ones only with
    ``?archived=on``."""
    default_project()  # the default workspace is listed before any experiment needed it
    show_archived = request.GET.get("archived") == "on"
    qs = readable_workspaces(request.user).order_by("name")
    if not show_archived:
        qs = qs.filter(archived=False)
    context = {"workspaces": list(qs), "show_archived": show_archived}
    return render(request, "dashboard/workspaces.html", context)


@require_GET
@login_required
def workspace_detail(request: HttpRequest, workspace_id: int) -> HttpResponse:
    """One workspace and its projects (with their experiment counts), archived ones marked."""
    workspace = get_object_or_404(readable_workspaces(request.user), id=workspace_id)
    projects = (
        Project.objects.filter(workspace=workspace)
        .select_related("owner")
        .annotate(num_experiments=Count("experiments"))
        .order_by("archived", "name")
    )
    context = {"workspace": workspace, "projects": list(projects)}
    return render(request, "dashboard/workspace.html", context)
