"""``RegistryAPI``'s workspace and project routes (``headway workspace``, ``headway project``,
``headway experiment move``). Answers are the DRF serializers' rows (``wire.Row``)."""

from __future__ import annotations

from typing import Any

from headway.client._api_base import APIBase
from headway.client._lazy_wire import wire


class WorkspaceAPI(APIBase):
    """A user's workspace and project calls (see ``RegistryAPI``)."""

    def workspace_create(self, name: str) -> wire.Row:
        """A new workspace owned by the caller (409: ``ConflictError`` when the name is taken)."""
        row: wire.Row = self._post("workspace_create", {"name": name})
        return row

    def workspace_list(self, *, archived: bool | None = None) -> list[wire.Row]:
        """Every workspace by name (only archived ones, or only the others, with ``archived``)."""
        params = None if archived is None else {"archived": str(archived).lower()}
        return self._list("workspace_list", params)

    def workspace_get(self, workspace_id: int) -> wire.Row:
        """One workspace (``num_projects``, ``num_experiments``)."""
        row: wire.Row = self._get("workspace_get", workspace_id=workspace_id)
        return row

    def workspace_archive(self, workspace_id: int, *, archived: bool = True) -> wire.Row:
        """Archive (or, ``archived=False``, unarchive) a workspace; its owner or an admin."""
        route = "workspace_archive" if archived else "workspace_unarchive"
        row: wire.Row = self._post(route, workspace_id=workspace_id)
        return row

    def workspace_members(self, workspace_id: int) -> list[wire.Row]:
        """The workspace's role bindings: ``id``, ``user`` or ``group``, ``role``."""
        return self._list("workspace_members", workspace_id=workspace_id)

    def workspace_grant(
        self, workspace_id: int, role: str, *, user: str | None = None, group: str | None = None
    ) -> wire.Row:
        """Bind ``role`` to a user or a group (exactly one; the workspace's admins; 400 naming
        ``user``, ``group`` or ``role`` when unknown)."""
        body: dict[str, Any] = {"role": role}
        body |= {"user": user} if user is not None else {"group": group}
        row: wire.Row = self._post("workspace_grant", body, workspace_id=workspace_id)
        return row

    def workspace_revoke(self, workspace_id: int, binding_id: int) -> None:
        """Remove a role binding (the workspace's admins)."""
        self._delete("workspace_revoke", workspace_id=workspace_id, binding_id=binding_id)

    def project_create(self, workspace_id: int, name: str, description: str = "") -> wire.Row:
        """A new project in ``workspace_id`` owned by the caller (409 when the workspace has
        one of that name; 400 naming ``workspace`` when it is unknown or archived)."""
        body: dict[str, Any] = {"workspace": workspace_id, "name": name}
        if description:
            body["description"] = description
        row: wire.Row = self._post("project_create", body)
        return row

    def project_list(self, *, workspace_id: int | None = None) -> list[wire.Row]:
        """Every project (of one workspace with ``workspace_id``), by workspace and name."""
        return self._list(
            "project_list", None if workspace_id is None else {"workspace": workspace_id}
        )

    def project_get(self, project_id: int) -> wire.Row:
        """One project (``workspace_id``, ``workspace_name``, ``num_experiments``)."""
        row: wire.Row = self._get("project_get", project_id=project_id)
        return row

    def project_archive(self, project_id: int, *, archived: bool = True) -> wire.Row:
        """Archive (or unarchive) a project; its owner, its workspace's owner or an admin."""
        route = "project_archive" if archived else "project_unarchive"
        row: wire.Row = self._post(route, project_id=project_id)
        return row

    def project_experiments(self, project_id: int) -> list[wire.Row]:
        """The project's experiments, newest first."""
        return self._list("experiment_list", {"project": project_id})

    def experiment_move(self, experiment_id: int, project_id: int) -> wire.Row:
        """Move an experiment into another project (400 naming ``project`` when it is unknown
        or archived); its owner or an admin."""
        row: wire.Row = self._post(
            "experiment_move", {"project": project_id}, experiment_id=experiment_id
        )
        return row
