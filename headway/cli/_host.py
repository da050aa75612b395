"""``headway host list | disable [--drain] | enable | remove``: an admin's worker-host
operations, as Determined's ``det agent list | disable [--drain] | enable``.

Over ``/api/v1/hosts/`` (admins only). Disable takes a host out of placement and preempts its
running trials (they checkpoint and resume on other hosts, not counted as restarts); with
``--drain`` they finish there instead. Enable makes it placeable again. Remove forgets a host
that holds no run and revokes its host token. docs/cli.md.
"""

from __future__ import annotations

import argparse

from headway.cli._common import make_api
from headway.cli._output import print_json, print_table


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``host list [--json] | disable NAME [--drain] | enable NAME | remove NAME``."""
    host = commands.add_parser("host", help="disable, drain, enable or remove worker hosts")
    cmds = host.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    listing = cmds.add_parser("list", help="hosts: state, alive, slots, pool, heartbeat, address")
    listing.add_argument("--json", action="store_true", help="print raw JSON")
    listing.set_defaults(func=cmd_list)
    disable = cmds.add_parser(
        "disable", help="place no new run on host NAME; its running trials move elsewhere"
    )
    disable.add_argument("name", metavar="NAME", help="the host's name (HEADWAY_HOST_NAME)")
    disable.add_argument(
        "--drain", action="store_true", help="let its running trials finish there instead"
    )
    disable.set_defaults(func=cmd_disable)
    enable = cmds.add_parser("enable", help="host NAME takes new runs again")
    enable.add_argument("name", metavar="NAME")
    enable.set_defaults(func=cmd_enable)
    remove = cmds.add_parser(
        "remove", help="forget host NAME (holding no run) and revoke its host token"
    )
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(func=cmd_remove)


def _age(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"


def cmd_list(args: argparse.Namespace) -> int:
    """One row per host: name, state (enabled / draining / disabled, alive / lost), slots
    used / total, pool, last heartbeat age, its agent's address; then, for each host the
    master drained itself, a line with the reason."""
    hosts = make_api(args).host_list()
    if args.json:
        print_json([host.model_dump(mode="json") for host in hosts])
        return 0
    print_table(
        ["host", "state", "slots", "pool", "heartbeat", "address"],
        [
            [
                host.name,
                f"{host.state}, {'alive' if host.alive else 'lost'}",
                f"{host.slots_in_use}/{host.slots}",
                host.pool,
                _age(host.heartbeat_age_seconds) or "stopped",
                host.address or None,
            ]
            for host in hosts
        ],
    )
    for host in hosts:
        if host.reason:  # why the master took it out of service itself
            print(f"{host.name}: {host.reason}")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    """Disable (or drain) the host; say what happens to its running trials."""
    host = make_api(args).host_disable(args.name, drain=args.drain)
    if args.drain:
        print(f"host {host.name} is draining: no new runs; {len(host.runs)} run(s) finish there")
    else:
        print(
            f"host {host.name} is disabled: no new runs; {len(host.runs)} run(s) asked to "
            "checkpoint and resume elsewhere"
        )
    return 0


def cmd_enable(args: argparse.Namespace) -> int:
    """Enable the host."""
    host = make_api(args).host_enable(args.name)
    print(f"host {host.name} is enabled")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """Remove the host (the master refuses while a run holds it, naming the runs)."""
    removed = make_api(args).host_remove(args.name)
    revoked = "; its host token was revoked" if removed.token_revoked else ""
    print(f"removed host {removed.name}{revoked}")
    return 0
