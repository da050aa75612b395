"""Who may read and change what: the one authorization rule of the REST API and the dashboard.

Roles per workspace (Determined's RBAC, three of its roles): ``viewer`` reads the workspace's
objects; ``editor`` also creates experiments and projects there and changes the objects it
owns; ``admin`` changes any object there, archives the workspace and its projects and manages
its role bindings (``RoleBinding``: a user or a Django group) and its ``everyone_role`` (the
role every logged-in user has there). Site admins (``is_staff`` or ``is_superuser``) do
everything everywhere. Without a role, a workspace's objects answer 404 and are absent from
lists (``scoped``). The default workspace's ``everyone_role`` is ``editor``, so an installation
that sets no roles behaves as before roles: everyone reads everything, creates, and changes
what they own. Registered models are in workspaces too (with their versions and aliases): an
editor creates models there; their owner (as an editor there), the workspace's admins and site
admins change them.

A trial's own data (metrics, checkpoints, progress, searcher reports, preemption
acknowledgements) is written only by that trial's live run token or by the owner: an admin may
stop or delete anything but never writes into someone else's run. A trial-run token
authenticates as the experiment's owner, and ``IsUserOrTrialScoped`` limits it to the SDK
endpoints of its own trial while the run has not exited (docs/rest-api.md).

Views (REST and dashboard) call these functions before the ``registry.lifecycle`` service, so
both front ends share the rule; ``NotPermitted`` is answered as 403 and ``Hidden`` as 404 by
the API's exception handler, and as an error note (or a 404 page) by the dashboard.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Manager, Model, Q, QuerySet

from registry.errors import RegistryError
from registry.models import ROLE_ORDER, Experiment, Role, RoleBinding, Trial, Workspace


class NotPermitted(RegistryError):
    """403: the user may read the object but neither owns it nor is an admin."""

    status = 403


class Hidden(RegistryError):
    """404: the object lives in a workspace where the user has no role (it is not shown)."""

    status = 404


# Where each model's workspace id is, for ``scoped``.
WORKSPACE_PATHS = {
    "Workspace": "id",
    "Project": "workspace_id",
    "Experiment": "project__workspace_id",
    "Trial": "experiment__project__workspace_id",
    "Checkpoint": "trial__experiment__project__workspace_id",
    "TrialRun": "trial__experiment__project__workspace_id",
    "MetricReport": "trial__experiment__project__workspace_id",
    "RegisteredModel": "workspace_id",
    "ModelVersion": "model__workspace_id",
    "ModelAlias": "model__workspace_id",
}
_CACHE = "_headway_workspace_roles"
_M = TypeVar("_M", bound=Model)


def _rank(role: str | None) -> int:
    """0 for no role, then 1..3 for viewer, editor, admin."""
    return 0 if role is None else ROLE_ORDER.index(Role(role)) + 1


def workspace_roles(user: Any) -> dict[int, str]:
    """``{workspace id: the user's best role}`` for every workspace the user has a role in.

    The role is the highest of the workspace's ``everyone_role`` and the user's and their
    groups' bindings. Two queries, cached on the user object (one request's user); a site admin
    is ``admin`` everywhere.
    """
    cached = getattr(user, _CACHE, None)
    if cached is not None:
        return cached
    roles: dict[int, str] = {}
    if user is None or not getattr(user, "is_authenticated", False):
        return roles
    if is_admin(user):
        roles = dict.fromkeys(Workspace.objects.values_list("id", flat=True), Role.ADMIN.value)
    else:
        for workspace_id, role in Workspace.objects.exclude(everyone_role=None).values_list(
            "id", "everyone_role"
        ):
            if role is not None:
                roles[workspace_id] = role
        bindings = RoleBinding.objects.filter(
            Q(user_id=user.pk) | Q(group__in=user.groups.all())
        ).values_list("workspace_id", "role")
        for workspace_id, role in bindings:
            if _rank(role) > _rank(roles.get(workspace_id)):
                roles[workspace_id] = role
    setattr(user, _CACHE, roles)
    return roles


def forget_roles(user: Any) -> None:
    """Drop the per-request cache of ``workspace_roles`` (after a change of bindings)."""
    if hasattr(user, _CACHE):
        delattr(user, _CACHE)


def role_in(user: Any, workspace_id: int | None) -> str | None:
    """The user's role in the workspace (``viewer``/``editor``/``admin``), None for none."""
    if workspace_id is None:
        return None
    role = workspace_roles(user).get(workspace_id)
    if role is None:
        # The cache may predate the workspace (the default one is made on first use, possibly
        # after this request's first read) or a binding this request made: read again once.
        forget_roles(user)
        role = workspace_roles(user).get(workspace_id)
    return role


def readable_workspaces(user: Any) -> list[int]:
    """Ids of the workspaces whose objects the user may read (any role)."""
    return list(workspace_roles(user))


def scoped(queryset: QuerySet[_M] | Manager[_M], user: Any) -> QuerySet[_M]:
    """``queryset`` (workspaces, projects, experiments, trials, checkpoints, runs, metric
    reports, models, model versions, aliases) less the rows in workspaces where ``user`` has no
    role; site admins see all."""
    rows = queryset.all()
    if is_admin(user):
        return rows
    path = WORKSPACE_PATHS[rows.model.__name__]
    return rows.filter(**{f"{path}__in": readable_workspaces(user)})


def changeable(queryset: QuerySet[_M] | Manager[_M], user: Any) -> QuerySet[_M]:
    """The rows of ``queryset`` (a model of ``WORKSPACE_PATHS`` with an ``owner``) that
    ``can_change`` allows ``user`` to change, as one filter: those in workspaces where the user
    is an admin, and the user's own in workspaces where it is an editor; site admins all."""
    rows = queryset.all()
    if is_admin(user):
        return rows
    path = WORKSPACE_PATHS[rows.model.__name__]
    roles = workspace_roles(user)
    admin_of = [w for w, role in roles.items() if _rank(role) >= _rank(Role.ADMIN)]
    editor_of = [w for w, role in roles.items() if _rank(role) >= _rank(Role.EDITOR)]
    return rows.filter(
        Q(**{f"{path}__in": admin_of}) | Q(**{f"{path}__in": editor_of, "owner_id": user.pk})
    )


def ensure_readable(user: Any, workspace_id: int | None, what: str) -> None:
    """Raise ``Hidden`` (404) unless the user has a role in the object's workspace."""
    if not is_admin(user) and role_in(user, workspace_id) is None:
        raise Hidden(f"No {what}.")


def is_admin(user: Any) -> bool:
    """True for Django staff and superusers (Determined's "admin")."""
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def can_change(user: Any, owner_id: int | None, workspace_id: int | None = None) -> bool:
    """True when ``user`` (authenticated) may change the object: a site admin; for an object
    in a workspace (``workspace_id``) the workspace's admin, or its owner with editor rights
    there; for an object outside workspaces (``workspace_id`` None) its owner."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if is_admin(user):
        return True
    owns = owner_id is not None and user.pk == owner_id
    if workspace_id is None:
        return owns
    rank = _rank(role_in(user, workspace_id))
    return rank >= _rank(Role.ADMIN) or (owns and rank >= _rank(Role.EDITOR))


def ensure_can_change(
    user: Any, owner_id: int | None, what: str, workspace_id: int | None = None
) -> None:
    """Raise ``NotPermitted`` unless ``can_change(user, owner_id, workspace_id)``.

    Arguments:
        what: the object, for the message (``"experiment 7"``, ``"trial 3"``).

    Raises:
        Hidden: (404) the user has no role in ``workspace_id``.
        NotPermitted: (403) otherwise.
    """
    if workspace_id is not None:
        ensure_readable(user, workspace_id, what)
    if not can_change(user, owner_id, workspace_id):
        raise NotPermitted(f"Only the owner of {what} (or a workspace admin) may do this.")


def experiment_owner_id(experiment_id: int) -> int | None:
    """The experiment's owner id; None when there is no such experiment."""
    return Experiment.objects.filter(id=experiment_id).values_list("owner_id", flat=True).first()


def _experiment_place(experiment_id: int) -> tuple[int | None, int | None]:
    row = (
        Experiment.objects.filter(id=experiment_id)
        .values_list("owner_id", "project__workspace_id")
        .first()
    )
    return row or (None, None)


def _trial_place(trial_id: int) -> tuple[int | None, int | None]:
    row = (
        Trial.objects.filter(id=trial_id)
        .values_list("experiment__owner_id", "experiment__project__workspace_id")
        .first()
    )
    return row or (None, None)


def ensure_can_change_experiment(user: Any, experiment_id: int) -> None:
    """``ensure_can_change`` for an experiment (pause, cancel, kill, archive, delete, GC).

    Raises:
        NotPermitted: not the owner nor an admin (also for an unknown id: check existence first).
    """
    owner_id, workspace_id = _experiment_place(experiment_id)
    ensure_can_change(user, owner_id, f"experiment {experiment_id}", workspace_id)


def ensure_can_change_trial(user: Any, trial_id: int) -> None:
    """``ensure_can_change`` for a trial (pause, activate, cancel, kill, continue).

    Raises:
        NotPermitted: not the owner nor an admin.
    """
    owner_id, workspace_id = _trial_place(trial_id)
    ensure_can_change(user, owner_id, f"trial {trial_id}", workspace_id)


def ensure_can_write_trial_data(user: Any, trial_id: int, *, run_trial_id: int | None) -> None:
    """Metrics, checkpoints and searcher reports of trial ``trial_id``: its own run or its owner.

    Arguments:
        run_trial_id: the trial of the run token the request used; None for a user's token or
            session.

    Raises:
        NotPermitted: a run token of another trial, or a user who does not own the trial
            (admins included: they stop and delete, they do not write into a run). An unknown
            trial passes: the service called next answers 404.
    """
    if run_trial_id is not None:
        if run_trial_id != trial_id:
            raise NotPermitted(f"This trial token may only access trial {run_trial_id}.")
        return
    # A user's write (an unmanaged run or an MLflow client reports with its user's token): 404
    # without a role in the workspace, and the owner needs an editor's rights there. One read
    # gives the owner, the workspace and its everyone-role: an owner whom every user's role
    # there already lets write (the default workspace) needs no read of role bindings.
    row = (
        Trial.objects.filter(id=trial_id)
        .values_list(
            "experiment__owner_id",
            "experiment__project__workspace_id",
            "experiment__project__workspace__everyone_role",
        )
        .first()
    )
    if row is None:
        return  # no such trial: the service answers 404
    owner_id, workspace_id, everyone_role = row
    if user.pk == owner_id and _rank(everyone_role) >= _rank(Role.EDITOR):
        return
    ensure_readable(user, workspace_id, f"trial {trial_id}")
    if user.pk != owner_id or _rank(role_in(user, workspace_id)) < _rank(Role.EDITOR):
        raise NotPermitted(
            f"Only trial {trial_id}'s own run or its owner may write its metrics and checkpoints."
        )


# Workspaces and projects. Any logged-in user may make a workspace (they become its admin);
# an editor makes projects in it and submits experiments into its projects that are not
# archived; a workspace's admin archives it and its projects, and manages its role bindings;
# a project's owner (an editor there) archives it too. The default workspace and project have
# no owner: their admins (site admins, unless bound) change them.


def ensure_can_change_workspace(user: Any, workspace: Any) -> None:
    """Archive / unarchive a workspace, change its bindings and ``everyone_role``: its admins.

    Raises:
        Hidden: no role there. NotPermitted: a role below admin.
    """
    ensure_readable(user, workspace.id, f"workspace {workspace.id}")
    if not is_admin(user) and role_in(user, workspace.id) != Role.ADMIN:
        raise NotPermitted(
            f"Only an admin of workspace {workspace.name!r} (or an admin of the site) may do this."
        )


def ensure_can_change_project(user: Any, project: Any) -> None:
    """Archive / unarchive a project: its workspace's admins, or its owner as an editor.

    Raises:
        Hidden: no role in the workspace. NotPermitted: otherwise.
    """
    ensure_can_change(user, project.owner_id, f"project {project.name!r}", project.workspace_id)


def may_create_in(user: Any, workspace_id: int) -> bool:
    """True when ``user`` may create objects (projects, experiments, models) in the workspace:
    its editors and admins, and site admins."""
    return is_admin(user) or _rank(role_in(user, workspace_id)) >= _rank(Role.EDITOR)


def _ensure_editor(user: Any, workspace_id: int, what: str) -> None:
    if user is None or not getattr(user, "is_authenticated", False):
        raise NotPermitted(f"Log in to create {what}.")
    ensure_readable(user, workspace_id, f"workspace {workspace_id}")
    if not may_create_in(user, workspace_id):
        raise NotPermitted(f"Only editors of the workspace may create {what}.")


def ensure_can_create_project_in(user: Any, workspace: Any) -> None:
    """Make a project in ``workspace``: its editors and admins.

    Raises:
        Hidden: no role there. NotPermitted: anonymous, or a viewer.
    """
    _ensure_editor(user, workspace.id, f"projects in workspace {workspace.name!r}")


def ensure_can_create_experiment_in(user: Any, project: Any) -> None:
    """Submit an experiment into ``project``: editors and admins of its workspace.

    Raises:
        Hidden: no role there. NotPermitted: anonymous, or a viewer.
    """
    _ensure_editor(user, project.workspace_id, f"experiments in project {project.name!r}")


def ensure_can_move_experiment(user: Any, experiment: Any, project: Any) -> None:
    """Move ``experiment`` into ``project``: who may change the experiment, into a project
    they may submit to.

    Raises:
        Hidden, NotPermitted: as ``ensure_can_change`` and ``ensure_can_create_experiment_in``.
    """
    ensure_can_change_experiment(user, experiment.id)
    ensure_can_create_experiment_in(user, project)


# Registered models live in a workspace: its editors create them, their owner (an editor there)
# and its admins change them (versions and aliases included), and moving one to another
# workspace needs those rights in both, so nobody moves a model out of their own reach or
# into a workspace where they could not change it.


def ensure_can_create_model_in(user: Any, workspace: Any) -> None:
    """Create a model in ``workspace``: its editors and admins.

    Raises:
        Hidden: no role there. NotPermitted: anonymous, or a viewer.
    """
    _ensure_editor(user, workspace.id, f"models in workspace {workspace.name!r}")


def ensure_can_move_model(user: Any, model: Any, workspace: Any) -> None:
    """Move ``model`` into ``workspace``: ``can_change`` for the model where it is and where
    it would be (its owner as an editor of both, or an admin of both; site admins).

    Raises:
        Hidden: no role in the model's workspace or in ``workspace``.
        NotPermitted: otherwise.
    """
    what = f"model {model.name!r}"
    ensure_can_change(user, model.owner_id, what, model.workspace_id)
    ensure_readable(user, workspace.id, f"workspace {workspace.id}")
    if not can_change(user, model.owner_id, workspace.id):
        raise NotPermitted(
            f"Only the owner of {what} as an editor of workspace {workspace.name!r}, or an admin"
            " of it, may move the model there."
        )
