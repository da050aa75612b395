"""Local mode's experiment config: the ``exp_conf`` a script passes to ``pytorch.init()`` (or
DeepSpeed's ``from_config``, or ``headway.exec.harness --config``) when it runs outside a
cluster, as Determined's local training takes one.

Such a config is often a few fields (``{searcher: {metric: ...}}``), or the experiment's whole
``const.yaml``. It is validated by ``ExperimentConfig``'s own models and rules, with only what a
cluster needs made optional: ``entrypoint`` (nothing is launched) and the searcher's ``name``
(no searcher runs; a nameless searcher is ``LocalSearcherConfig``). A given field is checked as
on submission, so a typo fails here and not later on the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError, model_validator

from headway.expconf._errors import ConfigError, format_path
from headway.expconf._experiment import ExperimentConfig
from headway.expconf._hparams import ConstHyperparameter
from headway.expconf._searchers import LocalSearcher, LocalSearcherConfig
from headway.expconf._yaml import check_depth


class LocalExperimentConfig(ExperimentConfig):
    """An ``ExperimentConfig`` as local mode takes it (see the module). Build it with
    ``parse_local_config``.

    Attributes:
        entrypoint (str | list[str]): as given; ``""`` when left out (nothing is launched).
        searcher (SearcherConfig | LocalSearcherConfig): a named searcher is validated as on
            the cluster; a nameless one has ``metric`` (None: no best checkpoint),
            ``smaller_is_better``, ``max_length``, ``time_metric`` and ``max_time``.
    """

    # Unvalidated defaults (pydantic checks given values only): the empty entrypoint is never
    # launched, and a nameless searcher with no fields has no metric.
    entrypoint: str | list[str] = ""
    # A local searcher may lack ``name``: the field widens the cluster's type on purpose.
    searcher: LocalSearcher = Field(default_factory=LocalSearcherConfig)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _check_trial_class_length(self) -> LocalExperimentConfig:
        # Overrides the cluster's rule: locally ``fit()`` is given its max_length by the caller.
        return self


def parse_local_config(exp_conf: Mapping[str, Any] | None) -> LocalExperimentConfig:
    """Validate local mode's ``exp_conf`` (None: an empty one).

    Arguments:
        exp_conf (Mapping | None): any subset of an experiment config's fields.

    Returns:
        LocalExperimentConfig: validated; absent fields at their defaults.

    Raises:
        ConfigError: ``errors`` maps each bad field's dotted path to messages, as
            ``parse_experiment_config`` does (``config`` for a value that is not a mapping).
    """
    if exp_conf is None:
        exp_conf = {}
    if not isinstance(exp_conf, Mapping):
        raise ConfigError.single(
            "config", f"exp_conf must be a mapping of fields, got {type(exp_conf).__name__}"
        )
    data = dict(exp_conf)
    check_depth(data)
    try:
        return LocalExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError.from_validation_error(exc, LocalExperimentConfig) from None


def constant_hparams(config: ExperimentConfig) -> dict[str, Any]:
    """The hyperparameters of a config whose every value is a constant, as plain values
    (nested groups as nested dicts): what a local run trains with.

    Raises:
        ConfigError: naming the first hyperparameter (in sorted order) that is a search space
            (``int``, ``double``, ``log``, ``categorical``): a local run needs one value.
    """
    return _constants(config.hyperparameters, ())


def _constants(space: Mapping[str, Any], route: tuple[str, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in sorted(space):
        hp = space[name]
        if isinstance(hp, dict):
            values[name] = _constants(hp, (*route, name))
        elif isinstance(hp, ConstHyperparameter):
            values[name] = hp.val
        else:
            raise ConfigError.single(
                format_path(("hyperparameters", *route, name)),
                f"is a search space ({hp.type}); a local run needs constant values",
            )
    return values
