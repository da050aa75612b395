"""``headway workspace create | list | describe | archive | unarchive``, ``headway project ...``
(with ``--workspace``) and ``headway experiment move`` (Determined's ``det workspace``,
``det project`` and ``det experiment move``).

Workspaces and projects are named on the command line; the client finds their ids in the
master's lists. A project name without ``--workspace`` must name exactly one project.
"""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import CLIError, make_api
from headway.cli._describe import Section, describe
from headway.cli._output import fmt_time, print_json, print_table
from headway.client import RegistryAPI

DEFAULT_NAME = "Uncategorized"  # the registry's default workspace and project


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``workspace`` and ``project`` and their subcommands under ``commands``."""
    workspace = commands.add_parser("workspace", help="workspaces (groups of projects)")
    ws_cmds = workspace.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    create = ws_cmds.add_parser("create", help="create a workspace (you own it)")
    create.add_argument("name", metavar="NAME")
    create.set_defaults(func=cmd_workspace_create)
    listing = ws_cmds.add_parser("list", help="list workspaces")
    listing.add_argument("--all", "-a", action="store_true", help="include archived ones")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_workspace_list)
    describe = ws_cmds.add_parser("describe", help="show a workspace and its projects")
    describe.add_argument("name", metavar="NAME")
    describe.add_argument("--json", action="store_true", help="print raw JSON")
    describe.set_defaults(func=cmd_workspace_describe)
    for verb, archived in (("archive", True), ("unarchive", False)):
        sub = ws_cmds.add_parser(verb, help=f"{verb} a workspace (its owner or an admin)")
        sub.add_argument("name", metavar="NAME")
        sub.set_defaults(func=cmd_workspace_archive, archived=archived)
    from headway.cli._workspace_members import add_parsers  # imports find_workspace from here

    add_parsers(ws_cmds)

    project = commands.add_parser("project", help="projects (groups of experiments)")
    p_cmds = project.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    create = p_cmds.add_parser("create", help="create a project in a workspace (you own it)")
    create.add_argument("name", metavar="NAME")
    create.add_argument("--workspace", "-w", required=True, help="the workspace's name")
    create.add_argument("--description", "-d", default="", help="free text")
    create.set_defaults(func=cmd_project_create)
    listing = p_cmds.add_parser("list", help="list projects")
    listing.add_argument("--workspace", "-w", help="only this workspace's")
    listing.add_argument("--all", "-a", action="store_true", help="include archived ones")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_project_list)
    describe = p_cmds.add_parser("describe", help="show a project and its experiments")
    _project_arguments(describe)
    describe.add_argument("--json", action="store_true", help="print raw JSON")
    describe.set_defaults(func=cmd_project_describe)
    for verb, archived in (("archive", True), ("unarchive", False)):
        sub = p_cmds.add_parser(verb, help=f"{verb} a project (its owner or an admin)")
        _project_arguments(sub)
        sub.set_defaults(func=cmd_project_archive, archived=archived)


def add_move_parser(exp_cmds: Any) -> None:
    """``experiment move ID --project NAME [--workspace NAME]``."""
    move = exp_cmds.add_parser("move", help="move an experiment into another project")
    move.add_argument("id", metavar="ID", type=int)
    move.add_argument("--project", "-p", required=True, help="the project's name")
    move.add_argument("--workspace", "-w", help="the project's workspace (if its name is shared)")
    move.set_defaults(func=cmd_experiment_move)


def _project_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")
    parser.add_argument("--workspace", "-w", help="its workspace (if the name is shared)")


def find_workspace(api: RegistryAPI, name: str) -> dict[str, Any]:
    """The workspace called ``name``. Raises ``CLIError`` when there is none."""
    for row in api.workspace_list():
        if row["name"] == name:
            return row
    raise CLIError(f"no workspace named {name!r} (see `headway workspace list`)")


def find_project(api: RegistryAPI, name: str, workspace: str | None) -> dict[str, Any]:
    """The project called ``name`` (in ``workspace`` when given).

    Raises:
        CLIError: no such project, or (without ``workspace``) several of that name.
    """
    workspace_id = find_workspace(api, workspace)["id"] if workspace is not None else None
    found = [row for row in api.project_list(workspace_id=workspace_id) if row["name"] == name]
    if not found:
        where = f" in workspace {workspace!r}" if workspace is not None else ""
        raise CLIError(f"no project named {name!r}{where} (see `headway project list`)")
    if len(found) > 1:
        spaces = ", ".join(sorted(row["workspace_name"] for row in found))
        raise CLIError(f"several projects are named {name!r} (in {spaces}): give --workspace")
    return found[0]


def cmd_workspace_create(args: argparse.Namespace) -> int:
    row = make_api(args).workspace_create(args.name)
    print(f"Created workspace {row['name']!r} ({row['id']})")
    return 0


def cmd_workspace_list(args: argparse.Namespace) -> int:
    rows = make_api(args).workspace_list(archived=None if args.all else False)
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ["ID", "NAME", "OWNER", "PROJECTS", "EXPERIMENTS", "ARCHIVED"],
        [
            [r["id"], r["name"], r["owner"], r["num_projects"], r["num_experiments"], r["archived"]]
            for r in rows
        ],
    )
    return 0


def cmd_workspace_describe(args: argparse.Namespace) -> int:
    api = make_api(args)
    row = api.workspace_get(find_workspace(api, args.name)["id"])
    projects = api.project_list(workspace_id=row["id"])
    return describe(
        args,
        {**row, "projects": projects},
        [
            ("ID", row["id"]),
            ("Name", row["name"]),
            ("Owner", row["owner"]),
            ("Archived", row["archived"]),
            ("Created", fmt_time(row["created_at"])),
            ("Experiments", row["num_experiments"]),
        ],
        Section(None, _project_rows(projects), _PROJECT_HEADERS),
    )


def cmd_workspace_archive(args: argparse.Namespace) -> int:
    api = make_api(args)
    row = api.workspace_archive(find_workspace(api, args.name)["id"], archived=args.archived)
    print(f"Workspace {row['name']!r} {'archived' if row['archived'] else 'unarchived'}")
    return 0


_PROJECT_HEADERS = ("ID", "WORKSPACE", "NAME", "OWNER", "EXPERIMENTS", "ARCHIVED")


def _project_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """The projects' table rows under ``_PROJECT_HEADERS`` (``project list``, below
    ``workspace describe``)."""
    return [
        [r["id"], r["workspace_name"], r["name"], r["owner"], r["num_experiments"], r["archived"]]
        for r in rows
    ]


def cmd_project_create(args: argparse.Namespace) -> int:
    api = make_api(args)
    workspace = find_workspace(api, args.workspace)
    row = api.project_create(workspace["id"], args.name, args.description)
    print(f"Created project {row['name']!r} ({row['id']}) in workspace {workspace['name']!r}")
    return 0


def cmd_project_list(args: argparse.Namespace) -> int:
    api = make_api(args)
    workspace_id = find_workspace(api, args.workspace)["id"] if args.workspace else None
    rows = api.project_list(workspace_id=workspace_id)
    if not args.all:
        rows = [r for r in rows if not r["archived"]]
    if args.json:
        print_json(rows)
    else:
        print_table(_PROJECT_HEADERS, _project_rows(rows))
    return 0


def cmd_project_describe(args: argparse.Namespace) -> int:
    api = make_api(args)
    row = find_project(api, args.name, args.workspace)
    experiments = api.project_experiments(row["id"])
    return describe(
        args,
        {**row, "experiments": experiments},
        [
            ("ID", row["id"]),
            ("Name", row["name"]),
            ("Workspace", row["workspace_name"]),
            ("Description", row["description"] or None),
            ("Owner", row["owner"]),
            ("Archived", row["archived"]),
            ("Created", fmt_time(row["created_at"])),
        ],
        Section(
            None,
            [[e["id"], e["name"], e["state"], e["owner"], e["num_trials"]] for e in experiments],
            ["ID", "NAME", "STATE", "OWNER", "TRIALS"],
        ),
    )


def cmd_project_archive(args: argparse.Namespace) -> int:
    api = make_api(args)
    project = find_project(api, args.name, args.workspace)
    row = api.project_archive(project["id"], archived=args.archived)
    print(f"Project {row['name']!r} {'archived' if row['archived'] else 'unarchived'}")
    return 0


def cmd_experiment_move(args: argparse.Namespace) -> int:
    api = make_api(args)
    project = find_project(api, args.project, args.workspace)
    row = api.experiment_move(args.id, project["id"])
    print(
        f"Moved experiment {row['id']} to project {row['project_name']!r} "
        f"in workspace {row['workspace_name']!r}"
    )
    return 0
