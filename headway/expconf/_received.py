"""An experiment config that crossed the wire: from the master to a host (the launch spec) and
from the host to the trial process (its cluster info).

It travels as the JSON the master stored, and is parsed once on arrival by
``ExperimentConfig``'s own rules, so hosts and trials read attributes
(``config.resources.slots_per_trial``), never keys.
"""

from __future__ import annotations

from typing import Any

from headway.expconf._errors import ConfigError
from headway.expconf._experiment import ExperimentConfig, parse_experiment_config


def parse_received_config(value: Any) -> ExperimentConfig:
    """Validate a config received over the wire (an ``ExperimentConfig`` passes as is).

    A field this side does not know (sent by a master newer than this host) is refused, not
    dropped: the run could not honour it (docs/decisions/sdk.md).

    Raises:
        ValueError: one message naming each bad field as ``experiment_config.<path>``.
    """
    if isinstance(value, ExperimentConfig):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"experiment_config must be a mapping, got {type(value).__name__}")
    try:
        return parse_experiment_config(value)
    except ConfigError as exc:
        fields = "; ".join(
            f"experiment_config.{path}: {' '.join(messages)}"
            for path, messages in exc.errors.items()
        )
        raise ValueError(
            f"the experiment config does not validate here ({fields}); a master newer than "
            "this host may send fields or values it does not know: upgrade the host"
        ) from None


def config_json(config: ExperimentConfig) -> dict[str, Any]:
    """The JSON of a config that crossed the wire: the fields it was given, as given
    (``exclude_unset``), so what a host passes on is what the master stored, and a newer
    master never adds fields an older host does not know to an experiment stored without them.
    """
    return config.model_dump(mode="json", exclude_unset=True)


def checkpoint_storage_json(config: ExperimentConfig) -> dict[str, Any]:
    """The config's ``checkpoint_storage`` as ``headway.storage`` builds a store from it (a
    mapping, the fields as given); ``{}`` when the config has none."""
    storage = config.checkpoint_storage
    return {} if storage is None else storage.model_dump(mode="json", exclude_unset=True)
