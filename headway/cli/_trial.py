"""``headway trial describe | logs | metrics``."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext
from typing import Any

from headway.cli import _common
from headway.cli._common import make_api
from headway.cli._describe import Section, describe
from headway.cli._output import fmt_size, fmt_time, print_table
from headway.client import wire


def cmd_describe(args: argparse.Namespace) -> int:
    """Trial fields, hyperparameters, summary metrics and checkpoints; ``--json`` for raw JSON."""
    api = make_api(args)
    trial = api.trial_get(args.id)
    checkpoints = api.trial_checkpoints(args.id)
    from headway.expconf import flatten_hparams

    rows = []
    for group, metrics in sorted(trial.summary_metrics.items()):
        for name, summary in sorted((metrics or {}).items()):
            summary = summary if isinstance(summary, dict) else {"last": summary}
            rows.append(
                [group, name] + [summary.get(key) for key in ("last", "min", "max", "count")]
            )
    more = (trial.summary_metrics_count or len(rows)) - len(rows)
    return describe(
        args,
        {"trial": trial.as_sent(), "checkpoints": [c.as_sent() for c in checkpoints]},
        [(name, getattr(trial, name)) for name in wire.TrialRow.SUMMARY_FIELDS]
        + [("created", fmt_time(trial.created_at)), ("ended", fmt_time(trial.ended_at))],
        Section("Hyperparameters", flatten_hparams(trial.hparams)),
        Section(
            "Summary metrics",
            rows,
            ["group", "name", "last", "min", "max", "count"],
            # The trial answer embeds at most 100 series; `trial metrics` pages them all.
            f"... and {more} more series (headway trial metrics {trial.id})" if more > 0 else None,
        ),
        Section(
            "Checkpoints",
            [
                [getattr(c, name) for name in wire.CheckpointRow.SUMMARY_FIELDS]
                + [fmt_size(c.size), fmt_time(c.created_at)]
                for c in checkpoints
            ],
            [*wire.CheckpointRow.SUMMARY_FIELDS, "size", "created"],
        ),
    )


def cmd_logs(args: argparse.Namespace) -> int:
    """Print a trial's log lines oldest first; with ``--follow`` until the trial stops.

    Pages with ``?after=<last id>``. When following, an empty page triggers a state check; once
    the trial is COMPLETED, CANCELED, ERROR or PAUSED one more page is read (lines written just
    before it stopped) and the command ends.
    """
    api = make_api(args)
    after: int | None = None
    stopping = False
    while True:
        batch = api.trial_logs(args.id, after=after)
        for line in batch:
            message = str(line.get("message", "")).rstrip("\n")
            if args.timestamps:
                message = f"[{fmt_time(line.get('timestamp'))}] {message}"
            print(message, flush=True)
            after = line.get("id", after)
        if batch:
            continue
        if not args.follow or stopping:
            return 0
        state = api.trial_get(args.id).state
        if state in _common.STOP_FOLLOWING_STATES:
            stopping = True
            continue
        time.sleep(_common.POLL_INTERVAL_S)


def cmd_metrics(args: argparse.Namespace) -> int:
    """A trial's metric series: a summary table, or with ``--csv`` every point as CSV.

    ``--csv`` streams the trial's ``metrics.csv`` (one line per point:
    ``group,name,steps_completed,value,epoch,reported_at,run_id``) to stdout or ``--output``
    chunk by chunk, so a series of millions of points never sits in memory.
    """
    if args.output and not args.csv:
        print("error: --output needs --csv", file=sys.stderr)
        return 2
    api = make_api(args)
    params: dict[str, Any] = {}
    if args.group:
        params["group"] = args.group
    if args.name:
        params["name"] = args.name
    if not args.csv:
        # Every series, a page at a time (the trial answer embeds at most 100).
        rows = [
            [s["group"], s["name"]]
            + [s.get(key) for key in ("count", "last_step", "last", "min", "max")]
            for s in api.trial_summary_metrics(args.id)
            if (not args.group or s["group"] == args.group)
            and (not args.name or s["name"] in args.name)
        ]
        print_table(["GROUP", "NAME", "COUNT", "LAST STEP", "LAST", "MIN", "MAX"], rows)
        return 0
    response = api.trial_metrics_csv(args.id, params)
    try:
        with open(args.output, "wb") if args.output else nullcontext(sys.stdout.buffer) as out:
            for chunk in response.iter_content(chunk_size=1 << 16):
                out.write(chunk)
            out.flush()
    finally:
        response.close()
    return 0
