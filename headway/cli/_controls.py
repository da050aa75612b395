"""``headway experiment pause|activate|cancel|kill|archive|unarchive`` and
``headway trial pause|activate|cancel|kill|continue``.

Each control is one POST to the registry, which alone decides whether the transition is legal
(an illegal one answers 409 and ``main`` prints its reason). Semantics follow Determined's
``det experiment pause|activate|cancel|kill`` and "Continue Trial" (docs/lifecycle.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from headway.cli._common import CLIError, make_api
from headway.cli._experiment import follow_experiment
from headway.client import EXPERIMENT_ACTIONS, TRIAL_ACTIONS


def cmd_experiment_control(args: argparse.Namespace) -> int:
    """POST ``experiments/ID/<action>/`` and print ``Experiment ID: STATE`` from the answer.

    ``archive``/``unarchive`` append ``(archived)`` when the experiment is archived. Pausing a
    paused experiment (and activating an active one) is a no-op, not an error.
    """
    experiment = make_api(args).experiment_control(args.id, args.action)
    suffix = " (archived)" if experiment.get("archived") else ""
    print(f"Experiment {experiment.get('id', args.id)}: {experiment.get('state')}{suffix}")
    return 0


def cmd_trial_control(args: argparse.Namespace) -> int:
    """POST ``trials/ID/<action>/`` and print ``Trial ID: STATE`` from the answer."""
    trial = make_api(args).trial_control(args.id, args.action)
    print(f"Trial {trial.id}: {trial.state}")
    return 0


def continue_body(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON body of ``POST trials/ID/continue`` from the parsed command line.

    Arguments:
        args (argparse.Namespace): ``checkpoint`` (str | None), ``max_length`` (str | None),
            ``hparam`` (list of ``NAME=VALUE`` | None).

    Returns:
        dict: ``checkpoint``, ``max_length`` and ``hparams`` (as parsed, not yet merged into
        the trial's groups), each only when given.

    Raises:
        CLIError: exit 2 for a malformed ``--max-length`` or ``--hparam``.
    """
    from headway.expconf import OverrideError, parse_hparam_overrides, parse_max_length

    body: dict[str, Any] = {}
    try:
        if args.checkpoint:
            body["checkpoint"] = args.checkpoint
        if args.max_length is not None:
            body["max_length"] = parse_max_length(args.max_length)
        overrides = parse_hparam_overrides(args.hparam or [])
    except OverrideError as exc:
        raise CLIError(str(exc), 2) from None
    if overrides:
        body["hparams"] = overrides
    return body


def cmd_trial_continue(args: argparse.Namespace) -> int:
    """Create a new experiment that continues trial ID from a checkpoint; optionally follow it.

    Overrides are checked before anything is sent (exit 2). When one sets a value inside a
    nested group (``--hparam optimizer.lr=0.1``) the trial is read first, so the rest of that
    group is kept (``merge_hparam_overrides``).
    """
    body = continue_body(args)
    api = make_api(args)
    overrides = body.get("hparams") or {}
    if any(isinstance(value, dict) for value in overrides.values()):
        from headway.expconf import merge_hparam_overrides

        current = api.trial_get(args.id).hparams
        body["hparams"] = merge_hparam_overrides(current, overrides)
    experiment = api.trial_continue(args.id, body)
    print(f"Created experiment {experiment['id']} (continues trial {args.id})")
    if not args.follow:
        return 0
    return follow_experiment(api, int(experiment["id"]))


def add_experiment_controls(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``pause | activate | cancel | kill | archive | unarchive ID`` under ``experiment``."""
    helps = {
        "pause": "pause every running trial (each checkpoints and stops)",
        "activate": "resume a paused experiment from its latest checkpoints",
        "cancel": "stop every trial gracefully with a checkpoint",
        "kill": "terminate every trial's process now",
        "archive": "hide an ended experiment from `experiment list`",
        "unarchive": "show an archived experiment again",
    }
    for action in EXPERIMENT_ACTIONS:
        sub = commands.add_parser(action, help=helps[action])
        sub.add_argument("id", metavar="ID", type=int)
        sub.set_defaults(func=cmd_experiment_control, action=action)


def add_trial_controls(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``pause | activate | cancel | kill | continue`` under ``trial``."""
    helps = {
        "pause": "checkpoint and stop one trial",
        "activate": "resume a paused trial from its latest checkpoint",
        "cancel": "stop one trial gracefully with a checkpoint",
        "kill": "terminate one trial's process now",
    }
    for action in TRIAL_ACTIONS:
        sub = commands.add_parser(action, help=helps[action])
        sub.add_argument("id", metavar="ID", type=int)
        sub.set_defaults(func=cmd_trial_control, action=action)
    cont = commands.add_parser(
        "continue", help="new experiment warm-started from a checkpoint of this trial"
    )
    cont.add_argument("id", metavar="ID", type=int)
    cont.add_argument("--checkpoint", metavar="UUID", help="default: the trial's latest")
    cont.add_argument(
        "--max-length",
        metavar="N|UNIT=N",
        help="new searcher.max_length: N batches, or batches=N, epochs=N, records=N",
    )
    cont.add_argument(
        "--hparam",
        metavar="NAME=VALUE",
        action="append",
        help="override a hyperparameter (YAML value; dotted NAME for nested); repeatable",
    )
    cont.add_argument("--follow", "-f", action="store_true", help="show progress until it ends")
    cont.set_defaults(func=cmd_trial_continue)
