"""``Workspace`` and ``Project``: where experiments live (Determined 0.38's names).

Every experiment belongs to exactly one project, and every project to one workspace. The
default workspace and its default project are both called ``Uncategorized`` (Determined's
names) and are ``immutable``: they always exist, cannot be archived, and hold every experiment
submitted without ``workspace`` / ``project`` in its config. ``default_project_id()`` makes
them when they are missing (a fresh database, or a test database emptied between tests), so
they need no fixture.
"""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

# Determined's name for the default workspace and the default project inside it.
DEFAULT_NAME = "Uncategorized"


class Role(models.TextChoices):
    """A workspace role; each includes the rights of those before it."""

    VIEWER = "viewer"
    EDITOR = "editor"
    ADMIN = "admin"


# Roles in increasing order of rights (``registry.authz.role_in`` compares their positions).
ROLE_ORDER = (Role.VIEWER, Role.EDITOR, Role.ADMIN)
# What ``everyone_role`` may be besides None: ``admin`` for every user would let anyone grant
# anything.
EVERYONE_ROLE_CHOICES = [(Role.VIEWER.value, "Viewer"), (Role.EDITOR.value, "Editor")]


class Workspace(models.Model):
    """A named group of projects (``workspaces/{id}/``); its owner (or an admin) changes it.

    ``owner`` is None for the default workspace (made by the system: only admins change it).
    """

    name = models.CharField(max_length=128, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    archived = models.BooleanField(default=False)
    # The default workspace (Determined's ``immutable``): never archived.
    immutable = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    # The role every logged-in user has here unless a binding gives more; None: private.
    everyone_role = models.CharField(
        max_length=16, choices=Role.choices, null=True, blank=True, default=None
    )

    class Meta:
        ordering: ClassVar[list[str]] = ["name"]

    def __str__(self) -> str:
        return f"Workspace {self.name}"


class Project(models.Model):
    """A named group of experiments inside a workspace (``projects/{id}/``); the name is
    unique within its workspace."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    archived = models.BooleanField(default=False)
    # The default project (Determined's ``immutable``): never archived.
    immutable = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering: ClassVar[list[str]] = ["workspace__name", "name"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["workspace", "name"], name="unique_project_name")
        ]

    def __str__(self) -> str:
        return f"Project {self.name}"


class RoleBinding(models.Model):
    """``role`` in ``workspace`` for one user or one Django group (exactly one of the two)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="bindings")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    group = models.ForeignKey(
        "auth.Group", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="role_binding_user_xor_group",
            ),
            models.UniqueConstraint(fields=["workspace", "user"], name="unique_user_binding"),
            models.UniqueConstraint(fields=["workspace", "group"], name="unique_group_binding"),
        ]


def default_project() -> Project:
    """The default project (``Uncategorized`` in workspace ``Uncategorized``), made if missing.

    Safe under concurrent first calls: the unique names make a racing insert fail, and the
    loser reads the winner's row.
    """
    found = Project.objects.filter(
        workspace__name=DEFAULT_NAME, name=DEFAULT_NAME, immutable=True
    ).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            workspace, _ = Workspace.objects.get_or_create(
                name=DEFAULT_NAME, defaults={"immutable": True, "everyone_role": Role.EDITOR}
            )
            project, _ = Project.objects.get_or_create(
                workspace=workspace, name=DEFAULT_NAME, defaults={"immutable": True}
            )
    except IntegrityError:  # made by a racing call between its get and its insert
        project = Project.objects.get(workspace__name=DEFAULT_NAME, name=DEFAULT_NAME)
    return project


def default_project_id() -> int:
    """``Experiment.project``'s default: the id of ``default_project()``."""
    return default_project().id


def default_workspace_id() -> int:
    """``RegisteredModel.workspace``'s default: the id of the default workspace
    (``Uncategorized``, made with its default project if missing)."""
    return default_project().workspace_id
