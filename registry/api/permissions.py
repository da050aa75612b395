"""Who may call what: users anything; trial tokens only their trial's SDK endpoints."""

from rest_framework.permissions import BasePermission

from registry.authz import ensure_can_change
from registry.models import TrialRun


def trial_run_of(request) -> TrialRun | None:
    """The ``TrialRun`` when the request used a trial token, else None."""
    return request.auth if isinstance(request.auth, TrialRun) else None


class IsUserOrTrialScoped(BasePermission):
    """Authenticated users pass; a trial token passes only views marked ``allow_trial_token``.

    Views that accept trial tokens check the trial id themselves (``ensure_trial_access``),
    because the id comes from the URL.
    """

    message = "Authentication credentials were not provided or are not valid for this endpoint."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if trial_run_of(request) is None:
            return True
        allowed = getattr(view, "allow_trial_token", ())
        return getattr(view, "action", None) in allowed


def ensure_owner_or_staff(
    request, owner_id: int, what: str, workspace_id: int | None = None
) -> None:
    """Changes and deletions: ``registry.authz.ensure_can_change`` for the request's user (the
    owner as an editor of ``workspace_id``, the workspace's admins, site admins).

    Raises:
        registry.authz.Hidden: (404) no role in ``workspace_id``.
        registry.authz.NotPermitted: (403) naming ``what`` (e.g. ``"experiment 7"``) otherwise.
    """
    ensure_can_change(request.user, owner_id, what, workspace_id)
