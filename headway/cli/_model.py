"""``headway model create | list | describe | register | download | alias`` (Determined's
``det model``).

``register NAME UUID`` registers checkpoint UUID as the next version of model NAME;
``register-version`` is an alias (Determined's name for it). ``alias set | delete | list``
manage the model's aliases (``champion`` -> version 3); ``describe`` and ``download`` take
``NAME@ALIAS`` for the version an alias points at (``NAME@latest``: the newest). A model lives
in a workspace (``create --workspace NAME``; default: the default workspace): models in
workspaces where the user has no role are not listed and answer as unknown.
"""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli import _checkpoint_download
from headway.cli._common import CLIError, make_api
from headway.cli._describe import Section, describe
from headway.cli._output import fmt_size, fmt_time, print_json, print_table
from headway.cli._workspace import find_workspace


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``model`` and its subcommands under the top-level ``commands``."""
    model = commands.add_parser("model", aliases=["m"], help="the model registry")
    cmds = model.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    create = cmds.add_parser("create", help="create a model")
    create.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    create.add_argument(
        "--workspace", "-w", help="the workspace's name (default: the default workspace)"
    )
    create.add_argument("--description", "-d", default="", help="free text")
    create.add_argument("--label", "-l", action="append", default=[], help="a label (repeatable)")
    create.set_defaults(func=cmd_create)

    listing = cmds.add_parser("list", help="list models")
    listing.add_argument("--all", "-a", action="store_true", help="include archived ones")
    listing.add_argument("--label", "-l", help="only models with this label")
    listing.add_argument("--workspace", "-w", help="only the models of this workspace (a name)")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_list)

    describe = cmds.add_parser(
        "describe", help="show a model and its versions (NAME@ALIAS: that version)"
    )
    describe.add_argument("name", metavar="NAME[@ALIAS]")
    describe.add_argument("--json", action="store_true", help="print raw JSON")
    describe.set_defaults(func=cmd_describe)

    register = cmds.add_parser(
        "register",
        aliases=["register-version"],
        help="register a checkpoint as the model's next version",
    )
    register.add_argument("name", metavar="NAME", help="the model")
    register.add_argument("uuid", metavar="UUID", help="a COMPLETED checkpoint")
    register.add_argument("--comment", "-c", default="", help="notes on this version")
    register.set_defaults(func=cmd_register)

    download = cmds.add_parser("download", help="download a version's checkpoint")
    download.add_argument(
        "name", metavar="NAME[@ALIAS]", help="NAME@ALIAS: the version the alias points at"
    )
    download.add_argument(
        "--version", "-v", type=int, metavar="N", help="version number (default: the latest)"
    )
    download.add_argument(
        "--output", "-o", metavar="DIR", help="target directory (default: checkpoints/UUID)"
    )
    download.set_defaults(func=cmd_download)

    alias = cmds.add_parser("alias", help="named pointers at versions (champion -> 3)")
    alias_cmds = alias.add_subparsers(dest="alias_command", metavar="COMMAND", required=True)
    alias_set = alias_cmds.add_parser("set", help="point ALIAS at VERSION (set or move it)")
    alias_set.add_argument("name", metavar="NAME")
    alias_set.add_argument("alias", metavar="ALIAS", help="a letter, then letters, digits, _ -")
    alias_set.add_argument("version", metavar="VERSION", type=_version_number)
    alias_set.set_defaults(func=cmd_alias_set)
    alias_delete = alias_cmds.add_parser("delete", help="delete ALIAS (the version stays)")
    alias_delete.add_argument("name", metavar="NAME")
    alias_delete.add_argument("alias", metavar="ALIAS")
    alias_delete.set_defaults(func=cmd_alias_delete)
    alias_list = alias_cmds.add_parser("list", help="the model's aliases (or their history)")
    alias_list.add_argument("name", metavar="NAME")
    alias_list.add_argument(
        "--history", action="store_true", help="every set, move and deletion, newest first"
    )
    alias_list.add_argument("--json", action="store_true", help="print raw JSON")
    alias_list.set_defaults(func=cmd_alias_list)


def _version_number(text: str) -> int:
    """A version number argument: an integer of at least 1 (argparse answers exit code 2)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a version number: {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError("a version number is 1 or more")
    return number


def split_alias(text: str) -> tuple[str, str | None]:
    """``NAME@ALIAS`` -> ``(NAME, ALIAS)``; ``NAME`` -> ``(NAME, None)``.

    Raises:
        CLIError: (exit code 2) an empty name or alias around the ``@``.
    """
    name, at, alias = text.partition("@")
    if not at:
        return text, None
    if not name or not alias:
        raise CLIError(f"{text!r}: expected NAME@ALIAS", exit_code=2)
    return name, alias


def cmd_create(args: argparse.Namespace) -> int:
    """Create a model; print ``Model NAME created``."""
    body: dict[str, Any] = {
        "name": args.name,
        "description": args.description,
        "labels": args.label,
    }
    if args.workspace is not None:
        body["workspace"] = args.workspace
    model = make_api(args).model_create(body)
    print(f"Model {model['name']} created in workspace {model['workspace_name']}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Table of models by name (archived ones only with ``--all``)."""
    api = make_api(args)
    params: dict[str, Any] = {}
    if not args.all:
        params["archived"] = "false"
    if args.label:
        params["label"] = args.label
    if args.workspace is not None:
        params["workspace"] = find_workspace(api, args.workspace)["id"]
    models = api.model_list(params)
    if args.json:
        print_json(models)
        return 0
    print_table(
        ["name", "versions", "latest", "labels", "workspace", "owner", "archived", "updated"],
        [
            [
                m.get("name"),
                m.get("num_versions"),
                m.get("latest_version"),
                ",".join(m.get("labels") or []) or None,
                m.get("workspace_name"),
                m.get("owner"),
                m.get("archived"),
                fmt_time(m.get("updated_at")),
            ]
            for m in models
        ],
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """The model's fields, then its versions (newest first); ``--json`` prints
    ``{"model", "versions"}`` raw."""
    api = make_api(args)
    name, alias = split_alias(args.name)
    if alias is not None:
        return _describe_version(args, api.model_alias_resolve(name, alias))
    model = api.model_get(name)
    versions = api.model_versions(name)
    return describe(
        args,
        {"model": model, "versions": versions},
        [("name", model.get("name")), ("workspace", model.get("workspace_name"))]
        + [(key, model.get(key)) for key in ("description", "labels", "owner", "archived")]
        + [
            ("metadata", model.get("metadata")),
            ("created", fmt_time(model.get("created_at"))),
            ("updated", fmt_time(model.get("updated_at"))),
        ],
        Section(
            "Versions",
            [
                [
                    v.get("version"),
                    v["checkpoint"].get("uuid"),
                    v["checkpoint"].get("trial_id"),
                    v["checkpoint"].get("steps_completed"),
                    fmt_size(v["checkpoint"].get("size")),
                    v["checkpoint"].get("state"),
                    fmt_time(v.get("created_at")),
                    ",".join(v.get("aliases") or []) or None,
                ]
                for v in versions
            ],
            [
                "version",
                "checkpoint",
                "trial",
                "steps_completed",
                "size",
                "state",
                "created",
                "aliases",
            ],
        ),
    )


def _describe_version(args: argparse.Namespace, version: dict[str, Any]) -> int:
    """One version's fields (``describe NAME@ALIAS``); ``--json`` prints the row raw."""
    checkpoint = version["checkpoint"]
    return describe(
        args,
        version,
        [
            ("model", version.get("model")),
            ("version", version.get("version")),
            ("aliases", ",".join(version.get("aliases") or []) or None),
            ("name", version.get("name")),
            ("comment", version.get("comment")),
            ("labels", version.get("labels")),
            ("owner", version.get("owner")),
            ("checkpoint", checkpoint.get("uuid")),
            ("trial", checkpoint.get("trial_id")),
            ("steps_completed", checkpoint.get("steps_completed")),
            ("size", fmt_size(checkpoint.get("size"))),
            ("state", checkpoint.get("state")),
            ("created", fmt_time(version.get("created_at"))),
        ],
    )


def cmd_register(args: argparse.Namespace) -> int:
    """Register checkpoint UUID as model NAME's next version; print ``NAME version N``."""
    body = {"checkpoint_uuid": args.uuid, "comment": args.comment}
    version = make_api(args).model_version_create(args.name, body)
    print(f"Registered checkpoint {args.uuid} as {args.name} version {version['version']}")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    """Download version ``--version`` (default: the latest) of model NAME's checkpoint into
    ``-o DIR`` with ``headway checkpoint download``'s code; print the directory."""
    api = make_api(args)
    name, alias = split_alias(args.name)
    if alias is not None:
        if args.version is not None:
            raise CLIError("give NAME@ALIAS or --version, not both", exit_code=2)
        found = api.model_alias_resolve(name, alias)
    elif args.version is None:
        latest = api.model_get(name).get("latest_version")
        if latest is None:
            raise CLIError(f"model {name} has no versions")
        found = api.model_version_get(name, int(latest))
    elif args.version < 1:
        raise CLIError("--version must be 1 or more", exit_code=2)
    else:
        found = api.model_version_get(name, args.version)
    uuid = str(found["checkpoint"]["uuid"])
    return _checkpoint_download.cmd_download(_checkpoint_download_args(args, uuid))


def _checkpoint_download_args(args: argparse.Namespace, uuid: str) -> argparse.Namespace:
    """The arguments ``headway checkpoint download UUID [-o DIR]`` would get: parsed by that
    command's own parser, so its other options keep their defaults."""
    parser = argparse.ArgumentParser(prog="headway checkpoint")
    _checkpoint_download.add_parser(parser.add_subparsers())
    argv = ["download", uuid] + (["--output", args.output] if args.output else [])
    parsed = parser.parse_args(argv)
    parsed.master = args.master
    return parsed


def cmd_alias_set(args: argparse.Namespace) -> int:
    """Point ALIAS of model NAME at VERSION; print ``NAME@ALIAS -> version N``."""
    row = make_api(args).model_alias_set(args.name, args.alias, args.version)
    print(f"{args.name}@{row['alias']} -> version {row['version']}")
    return 0


def cmd_alias_delete(args: argparse.Namespace) -> int:
    """Delete ALIAS of model NAME; print ``Deleted NAME@ALIAS``."""
    make_api(args).model_alias_delete(args.name, args.alias)
    print(f"Deleted {args.name}@{args.alias}")
    return 0


def cmd_alias_list(args: argparse.Namespace) -> int:
    """Table of the model's aliases, or with ``--history`` of every change, newest first."""
    api = make_api(args)
    if args.history:
        events = api.model_alias_history(args.name)
        if args.json:
            print_json(events)
            return 0
        print_table(
            ["alias", "action", "from", "to", "user", "time"],
            [
                [
                    e.get("alias"),
                    e.get("action"),
                    e.get("from_version"),
                    e.get("to_version"),
                    e.get("user"),
                    fmt_time(e.get("created_at")),
                ]
                for e in events
            ],
        )
        return 0
    aliases = api.model_aliases(args.name)
    if args.json:
        print_json(aliases)
        return 0
    print_table(
        ["alias", "version", "set_by", "updated"],
        [
            [a.get("alias"), a.get("version"), a.get("set_by"), fmt_time(a.get("updated_at"))]
            for a in aliases
        ],
    )
    return 0
