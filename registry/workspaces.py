"""Workspaces and projects: create, archive, find by name, and move experiments between projects.

Determined 0.38's model: a workspace holds projects, a project holds experiments, and every
experiment is in exactly one project (the default one, ``Uncategorized``, unless its config
names ``workspace`` and ``project``). An archived workspace or project takes no new projects or
experiments (a 400 naming the field); the default workspace and project are never archived.
Who may do what is ``registry.authz``'s (its ``ensure_can_*`` functions); the REST API, the
dashboard and experiment creation all call these functions.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, QuerySet

from registry.authz import (
    ensure_can_change_project,
    ensure_can_change_workspace,
    ensure_can_create_experiment_in,
    ensure_can_create_project_in,
    ensure_can_move_experiment,
    forget_roles,
    scoped,
)
from registry.errors import IllegalTransition, InvalidInput, RegistryError
from registry.models import (
    DEFAULT_NAME,
    Experiment,
    Project,
    Role,
    RoleBinding,
    Workspace,
    default_project,
)
from registry.user_text import DESCRIPTION_MAX, validate_text

# Names fit their columns and are one line (they appear in configs, the CLI and page titles).
WORKSPACE_NAME_MAX = 128


class NotFound(RegistryError):
    """404: no workspace or project of that id."""

    status = 404


class Conflict(RegistryError):
    """409: a duplicate name, or archiving the default workspace or project."""

    status = 409


def validate_workspace_name(value: Any, field: str = "name") -> str:
    """A workspace or project name: 1-128 characters, one line, no surrounding whitespace.

    Raises:
        InvalidInput: ``{field: [why]}``.
    """
    text = validate_text(value, field, WORKSPACE_NAME_MAX, required=True, multiline=False)
    if text != text.strip():
        raise InvalidInput({field: ["Must not start or end with whitespace."]})
    return text


def get_workspace(workspace_id: int) -> Workspace:
    """The workspace ``workspace_id``. Raises ``NotFound``."""
    found = Workspace.objects.select_related("owner").filter(id=workspace_id).first()
    if found is None:
        raise NotFound(f"No workspace {workspace_id}.")
    return found


def get_project(project_id: int) -> Project:
    """The project ``project_id`` (workspace joined). Raises ``NotFound``."""
    found = Project.objects.select_related("workspace", "owner").filter(id=project_id).first()
    if found is None:
        raise NotFound(f"No project {project_id}.")
    return found


def find_workspace(user: Any, ref: Any, field: str = "workspace") -> Workspace:
    """The open workspace ``ref`` names (its id, an integer, or its name, a string) among those
    where ``user`` has a role; None names the default workspace.

    Raises:
        InvalidInput: ``{field: [...]}``: neither an id nor a name, an unknown workspace (also
            one where the user has no role: its existence is not disclosed), or an archived one.
    """
    if ref is None:
        return default_project().workspace
    if isinstance(ref, int) and not isinstance(ref, bool) and ref >= 1:
        found = scoped(Workspace.objects.filter(id=ref), user).first()
        missing = f"No workspace {ref}."
    elif isinstance(ref, str) and ref:
        found = scoped(Workspace.objects.filter(name=ref), user).first()
        missing = f"No workspace named {ref!r}."
    else:
        raise InvalidInput({field: ["Must be a workspace id (a positive integer) or name."]})
    if found is None:
        raise InvalidInput({field: [missing]})
    if found.archived:
        raise InvalidInput({field: [f"Workspace {found.name!r} is archived."]})
    return found


def workspace_create(*, owner: Any, name: str) -> Workspace:
    """A new workspace ``name`` owned by ``owner`` (any logged-in user may make one).

    Raises:
        InvalidInput: a bad ``name``.
        Conflict: ``{"name": [...]}`` when the name is taken.
    """
    name = validate_workspace_name(name)
    default_project()  # so that nobody can take the default's name where it was missing
    try:
        with transaction.atomic():
            made = Workspace.objects.create(name=name, owner=owner)
            # A new workspace is private (no everyone_role); its creator administers it.
            RoleBinding.objects.create(workspace=made, user=owner, role=Role.ADMIN)
    except IntegrityError:
        message = f"A workspace named {name!r} already exists."
        raise Conflict(message, {"name": [message]}) from None
    forget_roles(owner)
    return made


def project_create(*, owner: Any, workspace_id: int, name: str, description: str = "") -> Project:
    """A new project ``name`` in workspace ``workspace_id``, owned by ``owner``.

    Raises:
        InvalidInput: a bad ``name`` or ``description``; ``{"workspace": [...]}`` when the
            workspace is unknown or archived.
        Conflict: ``{"name": [...]}`` when the workspace has a project of that name.
    """
    name = validate_workspace_name(name)
    description = validate_text(description, "description", DESCRIPTION_MAX)
    workspace = scoped(Workspace.objects.filter(id=workspace_id), owner).first()
    if workspace is None:
        raise InvalidInput({"workspace": [f"No workspace {workspace_id}."]})
    if workspace.archived:
        raise InvalidInput(
            {"workspace": [f"Workspace {workspace.name!r} is archived: it takes no new projects."]}
        )
    ensure_can_create_project_in(owner, workspace)
    try:
        with transaction.atomic():
            return Project.objects.create(
                workspace=workspace, name=name, description=description, owner=owner
            )
    except IntegrityError:
        message = f"Workspace {workspace.name!r} already has a project named {name!r}."
        raise Conflict(message, {"name": [message]}) from None


def workspace_set_archived(*, workspace: Workspace, user: Any, archived: bool) -> Workspace:
    """Archive or unarchive ``workspace`` (owner or admin; idempotent).

    Raises:
        NotPermitted: (403) neither the owner nor an admin.
        Conflict: archiving the default workspace.
    """
    ensure_can_change_workspace(user, workspace)
    if archived and workspace.immutable:
        raise Conflict(f"The default workspace {workspace.name!r} cannot be archived.")
    Workspace.objects.filter(id=workspace.id).update(archived=archived)
    workspace.archived = archived
    return workspace


def project_set_archived(*, project: Project, user: Any, archived: bool) -> Project:
    """Archive or unarchive ``project`` (owner, the workspace's owner, or an admin).

    Raises:
        NotPermitted: (403) not allowed to change it.
        Conflict: archiving the default project.
    """
    ensure_can_change_project(user, project)
    if archived and project.immutable:
        raise Conflict(f"The default project {project.name!r} cannot be archived.")
    Project.objects.filter(id=project.id).update(archived=archived)
    project.archived = archived
    return project


def _check_open(project: Project, field: str, workspace_field: str) -> None:
    if project.workspace.archived:
        raise InvalidInput(
            {
                workspace_field: [
                    f"Workspace {project.workspace.name!r} is archived: it takes no new "
                    "experiments."
                ]
            }
        )
    if project.archived:
        raise InvalidInput(
            {field: [f"Project {project.name!r} is archived: it takes no new experiments."]}
        )


def resolve_config_project(
    *, user: Any, workspace: str | None, project: str | None, prefix: str = "config."
) -> Project:
    """The project an experiment config names (``workspace`` and ``project``, both or neither,
    as Determined requires), or the default project when it names none.

    Arguments:
        prefix: put before the field names in errors (``config.workspace``).

    Raises:
        InvalidInput: naming ``<prefix>workspace`` or ``<prefix>project``: only one of them
            given, an unknown name, or an archived workspace or project.
    """
    ws_field, project_field = f"{prefix}workspace", f"{prefix}project"
    if (workspace is None and project is None) or (workspace == project == DEFAULT_NAME):
        # Named or not, the default project exists (made here on a database without it).
        found = default_project()
    else:
        # A workspace where the user has no role is answered as missing (no existence leak).
        if (
            workspace is not None
            and not scoped(Workspace.objects.filter(name=workspace), user).exists()
        ):
            raise InvalidInput({ws_field: [f"No workspace named {workspace!r}."]})
        if workspace is None or project is None:
            missing, given = (
                (ws_field, "project") if workspace is None else (project_field, "workspace")
            )
            raise InvalidInput(
                {missing: [f"Required with {given} (a project is named within its workspace)."]}
            )
        named = (
            scoped(Project.objects.select_related("workspace"), user)
            .filter(workspace__name=workspace, name=project)
            .first()
        )
        if named is None:
            raise InvalidInput(
                {project_field: [f"Workspace {workspace!r} has no project named {project!r}."]}
            )
        found = named
    if not found.immutable:
        _check_open(found, project_field, ws_field)
    ensure_can_create_experiment_in(user, found)
    return found


def experiment_move(*, experiment_id: int, project_id: Any, user: Any) -> Experiment:
    """Move experiment ``experiment_id`` into project ``project_id`` (Determined's
    ``MoveExperiment``); moving into the project it is in already changes nothing.

    The stored config keeps the ``workspace`` / ``project`` it was submitted with: the
    ``project`` column says where the experiment lives.

    Raises:
        InvalidInput: ``{"project": [...]}``: not an id, an unknown project, or an archived
            project or workspace.
        NotPermitted: (403) neither the experiment's owner nor an admin.
    """
    if isinstance(project_id, bool) or not isinstance(project_id, int) or project_id < 1:
        raise InvalidInput({"project": ["Must be a project id (a positive integer)."]})
    experiment = Experiment.objects.without_blobs().filter(id=experiment_id).first()
    if experiment is None:
        raise NotFound(f"No experiment {experiment_id}.")
    target = scoped(Project.objects.select_related("workspace"), user).filter(id=project_id).first()
    if target is None:
        raise InvalidInput({"project": [f"No project {project_id}."]})
    ensure_can_move_experiment(user, experiment, target)
    if experiment.project_id == target.id:
        return experiment
    if not target.immutable:
        _check_open(target, "project", "project")
    if experiment.is_deleted:
        raise IllegalTransition(f"experiment {experiment.id} is {experiment.state}")
    Experiment.objects.filter(id=experiment.id).update(project=target)
    experiment.project = target
    return experiment


def readable_workspaces(user: Any) -> QuerySet[Workspace]:
    """The workspaces where ``user`` has a role (``registry.authz.scoped``), with their owner
    and ``num_projects`` / ``num_experiments`` counts: what the REST list and the dashboard's
    workspace pages show."""
    return (
        scoped(Workspace.objects, user)
        .select_related("owner")
        .annotate(
            num_projects=Count("projects", distinct=True),
            num_experiments=Count("projects__experiments", distinct=True),
        )
    )
