"""``headway`` console script: argument parser and dispatch with user-facing error handling."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import requests

from headway.cli import (
    _auth,
    _checkpoint,
    _checkpoint_download,
    _controls,
    _experiment,
    _host,
    _host_token,
    _model,
    _pool,
    _tensorboard,
    _trial,
    _trial_list,
    _webhook,
    _worker,
    _workspace,
)
from headway.cli._common import DEFAULT_MASTER, CLIError, master_url
from headway.client import APIError, ConflictError, UnauthenticatedError


def build_parser() -> argparse.ArgumentParser:
    """The full ``headway`` parser; each leaf command sets ``func(args) -> exit code``."""
    parser = argparse.ArgumentParser(
        prog="headway", description="Headway: train PyTorch models as experiments and trials."
    )
    parser.add_argument(
        "--master",
        metavar="URL",
        help=f"registry URL (default: $HEADWAY_MASTER, else {DEFAULT_MASTER})",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    login = commands.add_parser("login", help="log in and save a token for this master")
    login.add_argument("--username", "-u")
    login.add_argument("--password", "-p", help="prompted for when left out")
    login.set_defaults(func=_auth.cmd_login)

    experiment = commands.add_parser("experiment", aliases=["e"], help="manage experiments")
    exp_cmds = experiment.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    create = exp_cmds.add_parser("create", help="validate a config, upload code, start")
    create.add_argument("config", metavar="CONFIG", help="experiment config (YAML file)")
    create.add_argument("model_dir", metavar="MODEL_DIR", help="directory with the model code")
    create.add_argument("--follow", "-f", action="store_true", help="show progress until it ends")
    create.set_defaults(func=_experiment.cmd_create)
    exp_list = exp_cmds.add_parser("list", help="list experiments")
    exp_list.add_argument("--all", "-a", action="store_true", help="include archived ones")
    exp_list.add_argument(
        "--filter",
        help='only experiments matching this filter, e.g. "accuracy > 0.9" (docs/search.md)',
    )
    exp_list.add_argument(
        "--order-by",
        help="comma-separated experiment fields, - for descending: --order-by=-best_validation",
    )
    exp_list.set_defaults(func=_experiment.cmd_list)
    exp_describe = exp_cmds.add_parser("describe", help="show an experiment and its trials")
    exp_describe.add_argument("id", metavar="ID", type=int)
    exp_describe.add_argument("--json", action="store_true", help="print raw JSON")
    exp_describe.set_defaults(func=_experiment.cmd_describe)
    _controls.add_experiment_controls(exp_cmds)
    _experiment.add_delete_parser(exp_cmds)
    _workspace.add_move_parser(exp_cmds)

    trial = commands.add_parser("trial", aliases=["t"], help="inspect and control trials")
    trial_cmds = trial.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    _trial_list.add_list_parser(trial_cmds)
    trial_describe = trial_cmds.add_parser("describe", help="show a trial")
    trial_describe.add_argument("id", metavar="ID", type=int)
    trial_describe.add_argument("--json", action="store_true", help="print raw JSON")
    trial_describe.set_defaults(func=_trial.cmd_describe)
    logs = trial_cmds.add_parser("logs", help="print a trial's logs")
    logs.add_argument("id", metavar="ID", type=int)
    logs.add_argument("--follow", "-f", action="store_true", help="wait for new lines")
    logs.add_argument("--timestamps", "-t", action="store_true", help="prefix timestamps")
    logs.set_defaults(func=_trial.cmd_logs)
    trial_metrics = trial_cmds.add_parser("metrics", help="show or export a trial's metrics")
    trial_metrics.add_argument("id", metavar="ID", type=int)
    trial_metrics.add_argument("--csv", action="store_true", help="every point as CSV")
    trial_metrics.add_argument("--group", help="only this group (training, validation, ...)")
    trial_metrics.add_argument("--name", action="append", help="only this metric (repeatable)")
    trial_metrics.add_argument("-o", "--output", help="with --csv: write to this file")
    trial_metrics.set_defaults(func=_trial.cmd_metrics)
    _controls.add_trial_controls(trial_cmds)

    checkpoint = commands.add_parser("checkpoint", aliases=["c"], help="manage checkpoints")
    ckpt_cmds = checkpoint.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    _checkpoint.add_parsers(ckpt_cmds)
    _checkpoint_download.add_parser(ckpt_cmds)

    worker = commands.add_parser("worker", aliases=["w"], help="inspect worker hosts")
    worker_cmds = worker.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    worker_list = worker_cmds.add_parser("list", help="hosts, their slots and what runs where")
    worker_list.add_argument("--json", action="store_true", help="print raw JSON")
    worker_list.set_defaults(func=_worker.cmd_list)
    _pool.add_pool_parser(commands)
    _host_token.add_parser(commands)
    _host.add_parser(commands)
    _tensorboard.add_parser(commands)
    _model.add_parser(commands)
    _workspace.add_parser(commands)
    _webhook.add_parser(commands)
    return parser


def _connection_message(exc: BaseException, master: str) -> str:
    text = str(exc.__cause__ or exc).lower()
    why = "connection refused" if "refused" in text else "no answer"
    return (
        f"cannot connect to the Headway master at {master} ({why});"
        " is it running? Use --master URL or $HEADWAY_MASTER to point elsewhere"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``headway`` command line; returns the exit status.

    0 on success, 1 for failures reported by (or reaching) the master, 2 for usage errors and
    invalid configs or model directories (found before anything is sent), 130 on Ctrl-C.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error; argparse already printed it
        return int(exc.code or 0)
    master = master_url(args)
    try:
        return int(args.func(args))
    except CLIError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ConflictError as exc:
        # An illegal transition: the master's reason already names the current state.
        detail = exc.body.get("detail") if isinstance(exc.body, dict) else None
        print(f"error: {detail or exc}", file=sys.stderr)
        return 1
    except UnauthenticatedError as exc:
        print(f"error: {exc} (run `headway login` or set $HEADWAY_TOKEN)", file=sys.stderr)
        return 1
    except APIError as exc:
        unreachable = exc.status is None
        print(f"error: {_connection_message(exc, master) if unreachable else exc}", file=sys.stderr)
        return 1
    except requests.RequestException as exc:
        print(f"error: request to {master} failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as exc:
        # A ConfigError can only come from a command that loaded the config models; importing
        # them here, not at the top, keeps them out of every other command's start (~0.2 s).
        from headway.expconf import ConfigError

        if not isinstance(exc, ConfigError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
