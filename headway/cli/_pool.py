"""``headway pool list``: the resource pools, their hosts and slots, and their queues."""

from __future__ import annotations

import argparse

from headway.cli._common import make_api
from headway.cli._output import print_json, print_table


def add_pool_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pool list [--json]`` (alias ``p``) to the ``headway`` parser."""
    pool = commands.add_parser("pool", aliases=["p"], help="inspect resource pools")
    pool_cmds = pool.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    pool_list = pool_cmds.add_parser("list", help="pools: alive hosts, slots, in use, queued runs")
    pool_list.add_argument("--json", action="store_true", help="print raw JSON")
    pool_list.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    """One row per resource pool (name, type, alive hosts, slots, slots in
    use, queued runs, description; a pool the admin's file no longer lists is marked); ``--json``
    prints the REST answer."""
    pools = make_api(args).resource_pool_list()
    if args.json:
        print_json(pools)
        return 0
    print_table(
        ["pool", "type", "hosts", "slots", "in use", "queued", "description"],
        [
            [
                pool.get("name"),
                pool.get("type"),
                pool.get("hosts"),
                pool.get("slots"),
                pool.get("slots_in_use"),
                pool.get("queued_runs"),
                pool.get("description")
                or ("(not in the pools file)" if pool.get("configured") is False else "-"),
            ]
            for pool in pools
        ],
    )
    return 0
