"""``headway experiment create | list | describe | delete``."""

from __future__ import annotations

import argparse
import base64
import time
from pathlib import Path
from typing import Any

from headway.cli import _common
from headway.cli._common import CLIError, make_api
from headway.cli._describe import Section, describe
from headway.cli._output import fmt, fmt_percent, fmt_time, print_table, truncate
from headway.client import RegistryAPI


def cmd_create(args: argparse.Namespace) -> int:
    """Validate CONFIG locally, pack MODEL_DIR, POST both; optionally follow the experiment.

    Nothing is sent when the config or the directory is invalid (exit 2). The packed archive
    goes through the registry's own check (``headway.archive.check_model_definition``, with the
    default size limit), so a refusal here reads exactly as the registry's would.
    """
    # Loaded here, not at the top: every command imports this module (see headway/cli/main.py).
    from headway.archive import (
        MAX_MODEL_DEF_BYTES,
        ModelDefinitionError,
        check_model_definition,
        pack_model_definition,
    )
    from headway.expconf import ConfigError, parse_experiment_config

    config_path = Path(args.config)
    try:
        config_text = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read config {config_path}: {exc}", 2) from None
    try:
        config = parse_experiment_config(config_text)
    except ConfigError as exc:
        exc.title = f"invalid experiment config {config_path}"
        raise CLIError(str(exc), 2) from None
    try:
        archive = pack_model_definition(Path(args.model_dir), MAX_MODEL_DEF_BYTES)
        check_model_definition(
            archive,
            max_bytes=MAX_MODEL_DEF_BYTES,
            entrypoint_class=config.entrypoint_trial_class,
        )
    except ModelDefinitionError as exc:
        raise CLIError(str(exc), 2) from None
    api = make_api(args)
    experiment = api.experiment_create(config_text, base64.b64encode(archive).decode())
    print(f"Created experiment {experiment['id']}")
    if not args.follow:
        return 0
    return follow_experiment(api, int(experiment["id"]))


def follow_experiment(api: RegistryAPI, experiment_id: int) -> int:
    """Show a progress bar until the experiment stops; 0 when it COMPLETED, else 1."""
    from tqdm import tqdm

    state = "?"
    # No rate or ETA: progress comes from the searcher in uneven steps, so they would mislead.
    bar_format = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}{postfix}"
    with tqdm(total=100, desc=f"experiment {experiment_id}", bar_format=bar_format) as bar:
        while True:
            experiment = api.experiment_get(experiment_id)
            state = str(experiment.get("state"))
            progress = experiment.get("progress") or 0.0
            bar.n = round(min(max(float(progress), 0.0), 1.0) * 100, 1)
            bar.set_postfix_str(state, refresh=False)
            bar.refresh()
            if state in _common.STOP_FOLLOWING_STATES:
                break
            time.sleep(_common.POLL_INTERVAL_S)
    print(f"Experiment {experiment_id} {state}")
    return 0 if state == "COMPLETED" else 1


def cmd_list(args: argparse.Namespace) -> int:
    """Table of experiments, newest first or in ``--order-by``'s order (the server sorts);
    archived ones only with --all."""
    experiments = make_api(args).experiment_list(filter=args.filter, order_by=args.order_by)
    if not args.all:
        experiments = [e for e in experiments if not e.get("archived")]
    print_table(
        ["id", "name", "state", "progress", "best_validation", "created"],
        [
            [
                e.get("id"),
                truncate(str(e.get("name", "")), 40),
                e.get("state"),
                fmt_percent(e.get("progress")),
                e.get("best_validation"),
                fmt_time(e.get("created_at")),
            ]
            for e in experiments
        ],
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """One experiment and its trials; ``--json`` prints ``{"experiment", "trials"}`` raw."""
    api = make_api(args)
    experiment = api.experiment_get(args.id)
    trials = api.experiment_trials(args.id)
    return describe(
        args,
        {"experiment": experiment, "trials": [t.as_sent() for t in trials]},
        _experiment_fields(experiment),
        Section(
            "Trials",
            [
                [
                    t.id,
                    t.state,
                    t.run_state,
                    t.steps_completed,
                    t.best_validation,
                    t.restarts,
                    truncate(fmt(t.hparams), 60),
                ]
                for t in trials
            ],
            [
                "id",
                "state",
                "run_state",
                "steps_completed",
                "best_validation",
                "restarts",
                "hparams",
            ],
        ),
    )


def _experiment_fields(experiment: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("id", experiment.get("id")),
        ("name", experiment.get("name")),
        ("state", experiment.get("state")),
        ("archived", experiment.get("archived")),
        ("owner", experiment.get("owner")),
        ("project", _place(experiment)),
        ("progress", fmt_percent(experiment.get("progress"))),
        ("searcher", experiment.get("searcher_name")),
        ("metric", experiment.get("searcher_metric")),
        ("best_validation", experiment.get("best_validation")),
        ("num_trials", experiment.get("num_trials")),
        ("labels", ", ".join(experiment.get("labels") or []) or None),
        ("description", experiment.get("description") or None),
        ("created", fmt_time(experiment.get("created_at"))),
        ("ended", fmt_time(experiment.get("ended_at"))),
    ]


def _place(experiment: dict[str, Any]) -> str | None:
    """``workspace / project`` (None from a registry without workspaces)."""
    if not experiment.get("project_name"):
        return None
    return f"{experiment.get('workspace_name')} / {experiment['project_name']}"


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete experiment ID after a confirmation (skipped with ``--yes``).

    The registry deletes an ended experiment's stored checkpoints and then its rows in the
    background (state DELETING); it refuses (409) a running experiment or one with a checkpoint
    that a model version holds.
    """
    if not args.yes:
        try:
            answer = input(
                f"Delete experiment {args.id} with its checkpoints, metrics and logs? [y/N] "
            )
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise CLIError("aborted; nothing deleted (pass --yes to skip this question)", 1)
    experiment = make_api(args).experiment_delete(args.id)
    print(f"Experiment {args.id}: {(experiment or {}).get('state', 'DELETING')}")
    return 0


def add_delete_parser(exp_cmds: Any) -> None:
    """``experiment delete ID [--yes]``."""
    delete = exp_cmds.add_parser(
        "delete", help="delete an ended experiment, its checkpoints' files and its records"
    )
    delete.add_argument("id", metavar="ID", type=int)
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    delete.set_defaults(func=cmd_delete)
