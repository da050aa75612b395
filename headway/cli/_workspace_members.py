"""``headway workspace members | grant | revoke``: a workspace's roles (viewer, editor,
admin) for users and groups (Determined's ``det rbac assign-role``, per workspace)."""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import CLIError, make_api
from headway.cli._output import print_json, print_table
from headway.cli._workspace import find_workspace

ROLES = ("viewer", "editor", "admin")


def add_parsers(ws_cmds: Any) -> None:
    """Register ``members``, ``grant`` and ``revoke`` under ``headway workspace``."""
    members = ws_cmds.add_parser("members", help="list a workspace's role bindings")
    members.add_argument("name", metavar="NAME")
    members.add_argument("--json", action="store_true", help="print raw JSON")
    members.set_defaults(func=cmd_workspace_members)
    grant = ws_cmds.add_parser("grant", help="give a user or group a role (workspace admins)")
    grant.add_argument("name", metavar="NAME")
    _who(grant)
    grant.add_argument("--role", "-r", required=True, choices=ROLES)
    grant.set_defaults(func=cmd_workspace_grant)
    revoke = ws_cmds.add_parser("revoke", help="remove a user's or group's role")
    revoke.add_argument("name", metavar="NAME")
    _who(revoke)
    revoke.set_defaults(func=cmd_workspace_revoke)


def _who(parser: argparse.ArgumentParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", "-u", help="a user's name")
    who.add_argument("--group", "-g", help="a group's name (single sign-on puts users in them)")


def cmd_workspace_members(args: argparse.Namespace) -> int:
    """Print the workspace's bindings (who, kind, role) and the role everyone has."""
    api = make_api(args)
    workspace = find_workspace(api, args.name)
    rows = api.workspace_members(workspace["id"])
    if args.json:
        print_json(rows)
        return 0
    table = [
        [row["user"] or row["group"], "user" if row["user"] else "group", row["role"]]
        for row in rows
    ]
    print_table(["NAME", "KIND", "ROLE"], table)
    print(f"Everyone else: {workspace.get('everyone_role') or 'no role'}")
    return 0


def cmd_workspace_grant(args: argparse.Namespace) -> int:
    """Bind ``--role`` to ``--user`` or ``--group`` (an existing binding gets the new role)."""
    api = make_api(args)
    workspace = find_workspace(api, args.name)
    row = api.workspace_grant(workspace["id"], args.role, user=args.user, group=args.group)
    print(f"{row['user'] or row['group']} is {row['role']} in workspace {args.name!r}.")
    return 0


def cmd_workspace_revoke(args: argparse.Namespace) -> int:
    """Remove the binding of ``--user`` or ``--group``.

    Raises:
        CLIError: the workspace binds no such user or group.
    """
    api = make_api(args)
    workspace = find_workspace(api, args.name)
    key, who = ("user", args.user) if args.user is not None else ("group", args.group)
    found: list[dict[str, Any]] = [
        row for row in api.workspace_members(workspace["id"]) if row[key] == who
    ]
    if not found:
        raise CLIError(f"Workspace {args.name!r} gives {key} {who!r} no role.")
    api.workspace_revoke(workspace["id"], found[0]["id"])
    print(f"Removed {key} {who!r}'s role in workspace {args.name!r}.")
    return 0
