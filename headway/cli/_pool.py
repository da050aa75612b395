"""``headway pool list | enable-node``: the resource pools, their hosts and slots, their queues
and the pools' nodes Headway excluded; an admin puts such a node back. docs/cli.md."""

from __future__ import annotations

import argparse

from headway.cli._common import make_api
from headway.cli._output import print_json, print_table


def add_pool_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``pool list [--json] | enable-node POOL NODE`` (alias ``p``) to the ``headway``
    parser."""
    pool = commands.add_parser("pool", aliases=["p"], help="inspect resource pools")
    pool_cmds = pool.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    pool_list = pool_cmds.add_parser("list", help="pools: alive hosts, slots, in use, queued runs")
    pool_list.add_argument("--json", action="store_true", help="print raw JSON")
    pool_list.set_defaults(func=cmd_list)
    enable = pool_cmds.add_parser(
        "enable-node",
        help="admins: put back a pool's node Headway excluded (after runs failed to start "
        "there): POOL's runs may use NODE again",
    )
    enable.add_argument("pool", metavar="POOL", help="the pool's name")
    enable.add_argument("node", metavar="NODE", help="the node's name, as pool list shows it")
    enable.set_defaults(func=cmd_enable_node)


def cmd_list(args: argparse.Namespace) -> int:
    """One row per resource pool (name, type, alive hosts, slots, slots in
    use, queued runs, description; a pool the admin's file no longer lists is marked), then per
    pool whose runs are jobs of a cluster a line with the cluster's nodes, slots and jobs, and
    a line per pending job with the cluster's reason, then a line per pool node Headway
    excluded, with the reason; ``--json`` prints the REST answer."""
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
    for pool in pools:
        name = pool.get("name")
        # A pool whose runs are jobs of a cluster: the cluster as its last poll saw it.
        if pool.get("cluster_error"):
            print(f"{name}: cluster did not answer: {pool.get('cluster_error')}")
        elif pool.get("cluster_nodes") is not None:
            print(
                f"{name}: cluster of {pool.get('cluster_nodes')} node(s), "
                f"{pool.get('cluster_slots')} slot(s); jobs {pool.get('jobs_pending')} pending, "
                f"{pool.get('jobs_running')} running"
            )
        for reason in pool.get("pending_reasons") or []:
            print(f"{name}: pending {reason}")
        for node in pool.get("excluded_nodes") or []:
            print(f"{pool.get('name')}: node {node.get('name')} {node.get('excluded_reason')}")
    return 0


def cmd_enable_node(args: argparse.Namespace) -> int:
    """Put the node back (admins); say so."""
    node = make_api(args).pool_node_enable(args.pool, args.node)
    print(f"Node {node.get('name')} of pool {node.get('pool')}: Headway's jobs may run there again")
    return 0
