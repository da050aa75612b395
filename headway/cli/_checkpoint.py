"""``headway checkpoint list | delete`` (``download`` lives in :mod:`._checkpoint_download`)."""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import make_api
from headway.cli._output import fmt, fmt_size, fmt_time, print_table
from headway.client import wire

ORDERINGS = ("steps_completed", "-steps_completed", "searcher_metric", "-searcher_metric")


def _flags(checkpoint: wire.CheckpointRow) -> str:
    flags = [name for name, on in (("best", checkpoint.best), ("latest", checkpoint.latest)) if on]
    return ",".join(flags) or "-"


def cmd_list(args: argparse.Namespace) -> int:
    """Table of an experiment's checkpoints (newest first, or ``--order-by``) with the searcher
    metric of the validation at each one's step and its ``best``/``latest`` flags."""
    checkpoints = make_api(args).experiment_checkpoints(args.experiment_id, order_by=args.order_by)
    print_table(
        [
            "uuid",
            "trial",
            "steps_completed",
            "searcher_metric",
            "flags",
            "size",
            "state",
            "created",
        ],
        [
            [
                c.uuid,
                c.trial_id,
                c.steps_completed,
                fmt(c.searcher_metric),
                _flags(c),
                fmt_size(c.size),
                c.state,
                fmt_time(c.created_at),
            ]
            for c in checkpoints
        ],
    )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete checkpoint UUID: remove its files from storage (the registry keeps a
    DELETED row). The registry refuses (409) a checkpoint a model version holds or a trial may
    still resume from."""
    make_api(args).checkpoint_delete(args.uuid)
    print(f"Checkpoint {args.uuid}: DELETED")
    return 0


def add_parsers(ckpt_cmds: Any) -> None:
    """``checkpoint list`` and ``checkpoint delete`` (``download`` is added by its module)."""
    ckpt_list = ckpt_cmds.add_parser("list", help="an experiment's checkpoints")
    ckpt_list.add_argument("experiment_id", metavar="EXPERIMENT_ID", type=int)
    ckpt_list.add_argument("--order-by", choices=ORDERINGS, help="sort key (default: newest first)")
    ckpt_list.set_defaults(func=cmd_list)
    delete = ckpt_cmds.add_parser("delete", help="delete a checkpoint's files from storage")
    delete.add_argument("uuid", metavar="UUID")
    delete.set_defaults(func=cmd_delete)
