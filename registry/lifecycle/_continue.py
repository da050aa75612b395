"""Continue trial: a new single-trial experiment warm-started from a checkpoint of another trial.

Determined's "Continue Trial": the new trial loads the checkpoint's models, optimizers, LR
schedulers and callbacks, but as its trial id differs from the checkpoint's, its batch and epoch
counters start at 0 (see the Core API seed and docs/lifecycle.md).
"""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from django.db import transaction

from registry.errors import InvalidInput
from registry.lifecycle._experiments import experiment_create
from registry.lifecycle._transitions import TRIAL_CONTROLS, check_control
from registry.models import Checkpoint, CheckpointState, Experiment, Trial


def _as_const_space(hparams: dict[str, Any]) -> dict[str, Any]:
    """Sampled hparams as a config space of consts (nested dicts stay nested groups)."""
    return {
        name: _as_const_space(value) if isinstance(value, dict) else {"type": "const", "val": value}
        for name, value in hparams.items()
    }


def trial_continue(
    *,
    trial_id: int,
    owner,
    checkpoint_uuid: uuid_lib.UUID | None = None,
    max_length: int | dict[str, int] | None = None,
    hparams: dict[str, Any] | None = None,
) -> Experiment:
    """Create the continuing experiment and return it.

    Arguments:
        checkpoint_uuid: the checkpoint to start from (default: the trial's latest).
        max_length: new ``searcher.max_length`` (same forms as the config; default: unchanged).
        hparams: values overriding the source trial's hparams.

    Raises:
        IllegalTransition: the trial is still ACTIVE or stopping.
        InvalidInput: no checkpoint, a checkpoint of another trial, or a bad override.
    """
    with transaction.atomic():
        trial = Trial.objects.select_related("experiment").get(id=trial_id)
        check_control(TRIAL_CONTROLS, "continue", f"trial {trial.id}", trial.state)
        chosen = checkpoint_uuid or trial.latest_checkpoint
        if chosen is None:
            raise InvalidInput(
                {"checkpoint": [f"Trial {trial.id} has no checkpoint to continue from."]}
            )
        state = (
            Checkpoint.objects.filter(uuid=chosen, trial=trial)
            .values_list("state", flat=True)
            .first()
        )
        if state is None:
            raise InvalidInput(
                {"checkpoint": [f"Checkpoint {chosen} is not a checkpoint of trial {trial.id}."]}
            )
        if state != CheckpointState.COMPLETED:
            raise InvalidInput(
                {"checkpoint": [f"Checkpoint {chosen} is {state}: its files are (being) deleted."]}
            )
        source = trial.experiment
        # From the validated stored config: one that no longer validates is refused (409,
        # StoredConfigInvalid naming the field), not copied on into the new experiment.
        config = source.conf.to_dict()
        config["name"] = f"{source.name} (continued from trial {trial.id})"
        # Into the source experiment's project (where it lives now, after any move).
        config["workspace"] = source.project.workspace.name
        config["project"] = source.project.name
        config["hyperparameters"] = _as_const_space({**trial.hparams, **(hparams or {})})
        # A single searcher: only the fields it shares with the source's searcher are kept
        # (a random or grid search's max_trials would be refused).
        searcher = {
            key: config["searcher"][key]
            for key in ("metric", "smaller_is_better", "max_length")
            if key in config["searcher"]
        }
        searcher["name"] = "single"
        searcher["source_trial_id"] = trial.id
        searcher["source_checkpoint_uuid"] = str(chosen)
        if max_length is not None:
            searcher["max_length"] = max_length
        config["searcher"] = searcher
        return experiment_create(
            owner=owner,
            config_source=config,
            model_definition=bytes(source.model_definition),
            source_trial=trial,
            warm_start_checkpoint=chosen,
        )
