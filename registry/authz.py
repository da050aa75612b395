"""Who may change what: the one authorization rule of the REST API and the dashboard.

Headway follows Determined without RBAC (and MLflow's default): every logged-in user may *read*
everything (experiments, trials, logs, metrics, checkpoints, models: team visibility); only the
owner of an experiment, trial or model, or an admin (``is_staff`` or ``is_superuser``), may
*change or delete* it. A trial's own data (metrics, checkpoints, progress, searcher reports,
preemption acknowledgements) is written only by that trial's live run token or by the owner: an
admin may stop or delete anything but never writes into someone else's run.

A trial-run token authenticates as the experiment's owner, and ``IsUserOrTrialScoped`` limits
it to the SDK endpoints of its own trial while the run has not exited (docs/rest-api.md).

Views (REST and dashboard) call these functions before the ``registry.lifecycle`` service, so
both front ends share the rule; ``NotPermitted`` is answered as 403 by the API's exception
handler and as an error note by the dashboard.
"""

from __future__ import annotations

from typing import Any

from registry.errors import RegistryError
from registry.models import Experiment, Trial


class NotPermitted(RegistryError):
    """403: the user may read the object but neither owns it nor is an admin."""

    status = 403


def is_admin(user: Any) -> bool:
    """True for Django staff and superusers (Determined's "admin")."""
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))


def can_change(user: Any, owner_id: int | None) -> bool:
    """True when ``user`` (authenticated) owns the object (``owner_id``) or is an admin."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return is_admin(user) or (owner_id is not None and user.pk == owner_id)


def ensure_can_change(user: Any, owner_id: int | None, what: str) -> None:
    """Raise ``NotPermitted`` unless ``can_change(user, owner_id)``.

    Arguments:
        what: the object, for the message (``"experiment 7"``, ``"trial 3"``).
    """
    if not can_change(user, owner_id):
        raise NotPermitted(f"Only the owner of {what} (or an admin) may do this.")


def experiment_owner_id(experiment_id: int) -> int | None:
    """The experiment's owner id; None when there is no such experiment."""
    return Experiment.objects.filter(id=experiment_id).values_list("owner_id", flat=True).first()


def trial_owner_id(trial_id: int) -> int | None:
    """The owner id of the trial's experiment; None when there is no such trial."""
    return Trial.objects.filter(id=trial_id).values_list("experiment__owner_id", flat=True).first()


def ensure_can_change_experiment(user: Any, experiment_id: int) -> None:
    """``ensure_can_change`` for an experiment (pause, cancel, kill, archive, delete, GC).

    Raises:
        NotPermitted: not the owner nor an admin (also for an unknown id: check existence first).
    """
    ensure_can_change(user, experiment_owner_id(experiment_id), f"experiment {experiment_id}")


def ensure_can_change_trial(user: Any, trial_id: int) -> None:
    """``ensure_can_change`` for a trial (pause, activate, cancel, kill, continue).

    Raises:
        NotPermitted: not the owner nor an admin.
    """
    ensure_can_change(user, trial_owner_id(trial_id), f"trial {trial_id}")


def ensure_can_write_trial_data(
    user: Any, trial_id: int, *, run_trial_id: int | None, owner_id: int | None = None
) -> None:
    """Metrics, checkpoints and searcher reports of trial ``trial_id``: its own run or its owner.

    Arguments:
        run_trial_id: the trial of the run token the request used; None for a user's token or
            session.
        owner_id: the trial's owner when the caller already read it (no query then).

    Raises:
        NotPermitted: a run token of another trial, or a user who does not own the trial
            (admins included: they stop and delete, they do not write into a run). An unknown
            trial passes: the service called next answers 404.
    """
    if run_trial_id is not None:
        if run_trial_id != trial_id:
            raise NotPermitted(f"This trial token may only access trial {run_trial_id}.")
        return
    if owner_id is None:
        owner_id = trial_owner_id(trial_id)
    if owner_id is None:
        return  # no such trial: the service answers 404
    if user.pk != owner_id:
        raise NotPermitted(
            f"Only trial {trial_id}'s own run or its owner may write its metrics and checkpoints."
        )


# Workspaces and projects. The rules live here, one function per question, so that a roles
# system can replace them in one place: for now any logged-in user may make a workspace (they
# own it), make a project in any workspace that is not archived, and submit experiments into
# any project that is not archived; changing a workspace or a project (archive, unarchive) is
# its owner's or an admin's, and a project's workspace owner may change it too. The default
# workspace and project have no owner: only admins change them.


def ensure_can_change_workspace(user: Any, workspace: Any) -> None:
    """Archive / unarchive a workspace: its owner or an admin.

    Raises:
        NotPermitted: otherwise.
    """
    ensure_can_change(user, workspace.owner_id, f"workspace {workspace.name!r}")


def ensure_can_change_project(user: Any, project: Any) -> None:
    """Archive / unarchive a project: its owner, its workspace's owner, or an admin.

    Raises:
        NotPermitted: otherwise.
    """
    if can_change(user, project.workspace.owner_id):
        return
    ensure_can_change(user, project.owner_id, f"project {project.name!r}")


def ensure_can_create_project_in(user: Any, workspace: Any) -> None:
    """Make a project in ``workspace``: any logged-in user (Determined without RBAC).

    Raises:
        NotPermitted: an anonymous user.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        raise NotPermitted(f"Log in to create projects in workspace {workspace.name!r}.")


def ensure_can_create_experiment_in(user: Any, project: Any) -> None:
    """Submit an experiment into ``project``: any logged-in user.

    Raises:
        NotPermitted: an anonymous user.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        raise NotPermitted(f"Log in to create experiments in project {project.name!r}.")


def ensure_can_move_experiment(user: Any, experiment: Any, project: Any) -> None:
    """Move ``experiment`` into ``project``: the experiment's owner or an admin (into any
    project they may submit to).

    Raises:
        NotPermitted: otherwise.
    """
    ensure_can_change(user, experiment.owner_id, f"experiment {experiment.id}")
    ensure_can_create_experiment_in(user, project)
