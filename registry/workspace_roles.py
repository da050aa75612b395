"""A workspace's role bindings and ``everyone_role``: list, grant, revoke, set.

Only the workspace's admins (and site admins) change them (``registry.authz``); the REST views
(``workspaces/{id}/members/``) and the CLI (``headway workspace grant``) call these functions.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import F, QuerySet

from registry.authz import ensure_can_change_workspace, forget_roles
from registry.errors import InvalidInput, RegistryError
from registry.models import Role, RoleBinding, Workspace

# The roles everyone may be given: ``admin`` for every logged-in user would make any user able
# to grant anything, so it is refused (bind a group instead).
EVERYONE_ROLES = (Role.VIEWER.value, Role.EDITOR.value)


class BindingNotFound(RegistryError):
    """404: no binding of that id in the workspace."""

    status = 404


def bindings(workspace: Workspace) -> QuerySet[RoleBinding]:
    """The workspace's bindings, users first (by name), then groups (by name)."""
    return (
        RoleBinding.objects.filter(workspace=workspace)
        .select_related("user", "group")
        .order_by(F("group__name").asc(nulls_first=True), "user__username")
    )


def _role(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidInput({field: [f"Must be one of: {', '.join(allowed)}."]})
    return value


def grant(
    *, workspace: Workspace, actor: Any, role: Any, user: Any = None, group: Any = None
) -> RoleBinding:
    """Bind ``role`` in ``workspace`` to the user named ``user`` or the group named ``group``
    (exactly one); an existing binding of that user or group gets the new role.

    Raises:
        Hidden, NotPermitted: the actor is not an admin of the workspace.
        InvalidInput: naming ``user``, ``group`` or ``role``: neither or both given, an unknown
            user or group, or an unknown role.
    """
    ensure_can_change_workspace(actor, workspace)
    role = _role(role, "role", tuple(Role.values))
    if (user is None) == (group is None):
        raise InvalidInput({"user": ["Give exactly one of user and group."]})
    if user is not None:
        found = get_user_model().objects.filter(username=user).first()
        if found is None:
            raise InvalidInput({"user": [f"No user named {user!r}."]})
        binding, _ = RoleBinding.objects.update_or_create(
            workspace=workspace, user=found, defaults={"role": role}
        )
    else:
        found_group = Group.objects.filter(name=group).first()
        if found_group is None:
            raise InvalidInput({"group": [f"No group named {group!r}."]})
        binding, _ = RoleBinding.objects.update_or_create(
            workspace=workspace, group=found_group, defaults={"role": role}
        )
    forget_roles(actor)
    return binding


def revoke(*, workspace: Workspace, actor: Any, binding_id: int) -> None:
    """Remove binding ``binding_id`` of ``workspace``.

    Raises:
        Hidden, NotPermitted: the actor is not an admin of the workspace.
        BindingNotFound: no such binding in the workspace.
    """
    ensure_can_change_workspace(actor, workspace)
    deleted, _ = RoleBinding.objects.filter(workspace=workspace, id=binding_id).delete()
    if not deleted:
        raise BindingNotFound(f"Workspace {workspace.name!r} has no binding {binding_id}.")
    forget_roles(actor)


def set_everyone_role(*, workspace: Workspace, actor: Any, role: Any) -> Workspace:
    """Set the role every logged-in user has in ``workspace`` (None: none, private).

    Raises:
        Hidden, NotPermitted: the actor is not an admin of the workspace.
        InvalidInput: ``{"everyone_role": [...]}`` for a role other than None, viewer, editor.
    """
    ensure_can_change_workspace(actor, workspace)
    if role is not None:
        role = _role(role, "everyone_role", EVERYONE_ROLES)
    Workspace.objects.filter(id=workspace.id).update(everyone_role=role)
    workspace.everyone_role = role
    forget_roles(actor)
    return workspace
