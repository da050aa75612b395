"""``headway tensorboard EXPERIMENT_ID``: download the trials' TensorBoard files and show them.

TensorBoard files travel inside checkpoints (``tensorboard/``, see
``headway.pytorch._tensorboard``), so the latest completed checkpoint of each trial holds that
trial's whole history. They are downloaded file by file (``Checkpoint.download_file``)
into ``<dir>/trial_<id>/`` and ``tensorboard --logdir <dir>`` is started, as Determined's
``det tensorboard start EXPERIMENT_ID`` shows one run per trial.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from headway.cli._common import CLIError, make_api

if TYPE_CHECKING:
    from headway.experimental.client import Experiment

TB_PREFIX = "tensorboard/"


def download_event_files(experiment: Experiment, dest: Path) -> int:
    """Download every trial's ``tensorboard/`` files into ``dest/trial_<id>/``; return the
    number of files."""
    count = 0
    for trial in experiment.get_trials():
        done = [c for c in trial.list_checkpoints() if c.state in (None, "COMPLETED")]
        if not done:
            continue
        latest = done[0]  # list_checkpoints: most steps first
        for relpath in sorted(latest.resources):
            if relpath.startswith(TB_PREFIX):
                target = dest / f"trial_{trial.id}" / relpath[len(TB_PREFIX) :]
                latest.download_file(relpath, target)
                count += 1
    return count


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """Download the experiment's TensorBoard files; print the folder or run TensorBoard on it."""
    from headway.experimental.client import Experiment

    api = make_api(args)
    data = api.experiment_get(args.experiment_id)
    experiment = Experiment(
        id=int(data["id"]),
        name=data.get("name"),
        state=data.get("state"),
        config=dict(data.get("config") or {}),
        _api=api,
    )
    dest = Path(args.output or tempfile.mkdtemp(prefix=f"headway-tb-exp{args.experiment_id}-"))
    dest.mkdir(parents=True, exist_ok=True)
    count = download_event_files(experiment, dest)
    if count == 0:
        raise CLIError(
            f"experiment {args.experiment_id} has no TensorBoard files in its checkpoints "
            "(reported metrics are written there automatically unless TensorBoard logging is "
            "off, and trials add their own with context.get_tensorboard_writer(); only "
            "checkpoints carry them)"
        )
    if args.print_logdir_only:
        print(dest.resolve())
        return 0
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(dest)]
    command += ["--port", str(args.port)]
    print(f"TensorBoard for experiment {args.experiment_id}: {' '.join(command)}", flush=True)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``headway tensorboard``."""
    tb = commands.add_parser(
        "tensorboard", help="download an experiment's TensorBoard files and run TensorBoard"
    )
    tb.add_argument("experiment_id", metavar="EXPERIMENT_ID", type=int)
    tb.add_argument("--output", "-o", metavar="DIR", help="download here (default: a temp dir)")
    tb.add_argument("--port", type=int, default=6006, help="TensorBoard's port (default 6006)")
    tb.add_argument(
        "--print-logdir-only",
        action="store_true",
        help="download, print the folder and exit without starting TensorBoard",
    )
    tb.set_defaults(func=cmd_tensorboard)
