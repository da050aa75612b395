"""``headway model create | list | describe | register | download`` (Determined's ``det model``).

``register NAME UUID`` registers checkpoint UUID as the next version of model NAME;
``register-version`` is an alias (Determined's name for it).
"""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli import _checkpoint_download
from headway.cli._common import CLIError, make_api
from headway.cli._output import fmt_size, fmt_time, print_fields, print_json, print_table


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``model`` and its subcommands under the top-level ``commands``."""
    model = commands.add_parser("model", aliases=["m"], help="the model registry")
    cmds = model.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

    create = cmds.add_parser("create", help="create a model")
    create.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    create.add_argument("--description", "-d", default="", help="free text")
    create.add_argument("--label", "-l", action="append", default=[], help="a label (repeatable)")
    create.set_defaults(func=cmd_create)

    listing = cmds.add_parser("list", help="list models")
    listing.add_argument("--all", "-a", action="store_true", help="include archived ones")
    listing.add_argument("--label", "-l", help="only models with this label")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_list)

    describe = cmds.add_parser("describe", help="show a model and its versions")
    describe.add_argument("name", metavar="NAME")
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
    download.add_argument("name", metavar="NAME")
    download.add_argument(
        "--version", "-v", type=int, metavar="N", help="version number (default: the latest)"
    )
    download.add_argument(
        "--output", "-o", metavar="DIR", help="target directory (default: checkpoints/UUID)"
    )
    download.set_defaults(func=cmd_download)


def cmd_create(args: argparse.Namespace) -> int:
    """Create a model; print ``Model NAME created``."""
    body = {"name": args.name, "description": args.description, "labels": args.label}
    model = make_api(args).model_create(body)
    print(f"Model {model['name']} created")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Table of models by name (archived ones only with ``--all``)."""
    params: dict[str, Any] = {}
    if not args.all:
        params["archived"] = "false"
    if args.label:
        params["label"] = args.label
    models = make_api(args).model_list(params)
    if args.json:
        print_json(models)
        return 0
    print_table(
        ["name", "versions", "latest", "labels", "owner", "archived", "updated"],
        [
            [
                m.get("name"),
                m.get("num_versions"),
                m.get("latest_version"),
                ",".join(m.get("labels") or []) or None,
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
    model = api.model_get(args.name)
    versions = api.model_versions(args.name)
    if args.json:
        print_json({"model": model, "versions": versions})
        return 0
    print_fields(
        [(key, model.get(key)) for key in ("name", "description", "labels", "owner", "archived")]
        + [
            ("metadata", model.get("metadata")),
            ("created", fmt_time(model.get("created_at"))),
            ("updated", fmt_time(model.get("updated_at"))),
        ]
    )
    print("\nVersions:")
    print_table(
        ["version", "checkpoint", "trial", "steps_completed", "size", "state", "created"],
        [
            [
                v.get("version"),
                v["checkpoint"].get("uuid"),
                v["checkpoint"].get("trial_id"),
                v["checkpoint"].get("steps_completed"),
                fmt_size(v["checkpoint"].get("size")),
                v["checkpoint"].get("state"),
                fmt_time(v.get("created_at")),
            ]
            for v in versions
        ],
    )
    return 0


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
    if args.version is None:
        latest = api.model_get(args.name).get("latest_version")
        if latest is None:
            raise CLIError(f"model {args.name} has no versions")
        version = int(latest)
    elif args.version < 1:
        raise CLIError("--version must be 1 or more", exit_code=2)
    else:
        version = args.version
    found = api.model_version_get(args.name, version)
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
