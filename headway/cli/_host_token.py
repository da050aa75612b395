"""``headway host-token create|list|revoke``: worker hosts' tokens (admins)."""

from __future__ import annotations

import argparse
import sys

from headway.cli._common import make_api
from headway.cli._output import print_json, print_table


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``host-token create NAME | list [--json] | revoke NAME`` to the ``headway`` parser."""
    host_token = commands.add_parser("host-token", help="issue and revoke worker hosts' tokens")
    cmds = host_token.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    create = cmds.add_parser("create", help="issue a token for host NAME; prints its key once")
    create.add_argument("name", metavar="NAME", help="the host's name (HEADWAY_HOST_NAME)")
    create.set_defaults(func=cmd_create)
    listing = cmds.add_parser("list", help="every host token, live and revoked")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_list)
    revoke = cmds.add_parser("revoke", help="revoke host NAME's token (its next call fails)")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(func=cmd_revoke)


def cmd_create(args: argparse.Namespace) -> int:
    """Print the new key alone on stdout (for ``HEADWAY_HOST_TOKEN=$(headway host-token
    create NAME)``); the note that it is shown once goes to stderr."""
    created = make_api(args).host_token_create(args.name)
    print(f"issued a token for host {created.name}; it is shown only now:", file=sys.stderr)
    print(created.key)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """One row per token: host, created (by whom), last used, revoked."""
    tokens = make_api(args).host_token_list()
    if args.json:
        print_json([token.model_dump(mode="json") for token in tokens])
        return 0
    print_table(
        ["host", "created", "by", "last used", "revoked"],
        [
            [
                token.name,
                f"{token.created_at:%Y-%m-%d %H:%M}",
                token.created_by,
                f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else None,
                f"{token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else None,
            ]
            for token in tokens
        ],
    )
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    """Revoke the host's live token; the host's next call is refused (401)."""
    token = make_api(args).host_token_revoke(args.name)
    print(f"revoked the token of host {token.name}")
    return 0
