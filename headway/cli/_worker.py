"""``headway worker list``: the registered worker hosts and the trial runs on each."""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import make_api
from headway.cli._output import fmt_time, print_json, print_table


def cmd_list(args: argparse.Namespace) -> int:
    """One row per host (slots in use / slots, devices, alive, last heartbeat, start, resource
    pool), then one row per trial run holding slots (host, trial, experiment, run, devices,
    state); ``--json`` prints the REST answer."""
    hosts = make_api(args).worker_list()
    if args.json:
        print_json(hosts)
        return 0
    print_table(
        [
            "host",
            "alive",
            "slots",
            "in use",
            "devices",
            "kind",
            "last heartbeat",
            "started",
            "pool",
        ],
        [
            [
                host.get("name"),
                "yes" if host.get("alive") else "NO",
                host.get("slots"),
                host.get("slots_in_use"),
                ",".join(str(d) for d in host.get("devices") or []) or "-",
                "gpu" if host.get("gpu") else "cpu",
                fmt_time(host.get("heartbeat_at")),
                fmt_time(host.get("started_at")),
                host.get("pool") or "-",
            ]
            for host in hosts
        ],
    )
    runs = [(host.get("name"), run) for host in hosts for run in host.get("runs") or []]
    if runs:
        print("\nRuns:")
        print_table(
            ["host", "trial", "experiment", "run", "state", "devices", "started"],
            [_run_row(name, run) for name, run in runs],
        )
    return 0


def _run_row(host: Any, run: dict[str, Any]) -> list[Any]:
    return [
        host,
        run.get("trial_id"),
        run.get("experiment_id"),
        run.get("run_id"),
        run.get("state"),
        ",".join(str(d) for d in run.get("devices") or []) or "-",
        fmt_time(run.get("started_at")),
    ]
