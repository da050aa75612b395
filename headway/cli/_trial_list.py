"""``headway trial list``: trials across experiments, found by results (docs/search.md)."""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import make_api
from headway.cli._output import fmt_time, print_json, print_table, truncate
from headway.client import wire


def _hparams_text(hparams: Any, prefix: str = "") -> str:
    """``lr=0.01 optim.name=adam``: the hyperparameters on one line, nested names dotted."""
    if not isinstance(hparams, dict):
        return ""
    parts = []
    for name, value in sorted(hparams.items()):
        if isinstance(value, dict):
            parts.append(_hparams_text(value, f"{prefix}{name}."))
        else:
            parts.append(f"{prefix}{name}={value}")
    return " ".join(part for part in parts if part)


def _metric(trial: wire.TrialRow, name: str) -> Any:
    entry = (trial.summary_metrics.get("validation") or {}).get(name)
    return entry.get("last") if isinstance(entry, dict) else None


def cmd_list(args: argparse.Namespace) -> int:
    """One page of trials matching ``--filter``, sorted by ``--order-by``; ``--metric`` adds
    a column of each trial's latest validation value of that metric."""
    page = make_api(args).trial_list(
        filter=args.filter,
        order_by=args.order_by,
        experiment_id=args.experiment,
        limit=args.limit,
        offset=args.offset,
    )
    trials = page.results
    if args.json:
        print_json(page.as_sent())
        return 0
    metrics = args.metric or []
    print_table(
        ["id", "experiment", "state", "steps", "best_validation", *metrics, "hparams", "started"],
        [
            [
                t.id,
                t.experiment_id,
                t.state,
                t.steps_completed,
                t.best_validation,
                *[_metric(t, name) for name in metrics],
                truncate(_hparams_text(t.hparams), 50),
                fmt_time(t.created_at),
            ]
            for t in trials
        ],
    )
    shown = args.offset + len(trials)
    print(f"{len(trials)} of {page.count} trials", end="")
    print(f" (more: --offset {shown})" if page.next else "")
    return 0


def add_list_parser(trial_cmds: Any) -> None:
    """``trial list`` under the ``trial`` subcommands."""
    trial_list = trial_cmds.add_parser(
        "list", help="find trials across experiments by results (filter, order)"
    )
    trial_list.add_argument(
        "--filter",
        help='e.g. "validation_accuracy > 0.95 and hparams.lr < 1e-3" (docs/search.md)',
    )
    trial_list.add_argument(
        "--order-by",
        help="comma-separated fields, - for descending: --order-by=-validation_accuracy",
    )
    trial_list.add_argument("--experiment", "-e", type=int, help="only this experiment's trials")
    trial_list.add_argument(
        "--metric", action="append", help="also show this validation metric (repeatable)"
    )
    trial_list.add_argument("--limit", type=int, default=100, help="trials per page (1..1000)")
    trial_list.add_argument("--offset", type=int, default=0, help="skip this many trials")
    trial_list.add_argument("--json", action="store_true", help="print the raw page as JSON")
    trial_list.set_defaults(func=cmd_list)
