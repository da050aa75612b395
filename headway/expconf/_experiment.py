"""``ExperimentConfig``: the validated experiment config (a subset of Determined's schema)."""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from headway.expconf._base import StrictModel, field_error, reject_unsupported
from headway.expconf._environment import EnvironmentConfig
from headway.expconf._errors import ConfigError, format_path
from headway.expconf._hparams import GRID_COUNT_REQUIRED, Hyperparameter, range_hyperparameters
from headway.expconf._length import Length
from headway.expconf._log_policies import LogPolicy
from headway.expconf._searchers import SearcherConfig
from headway.expconf._sections import UNSUPPORTED_TOP_LEVEL, ProfilingConfig, zero_length_is_never
from headway.expconf._storage import LOCATION_NAME, CheckpointStorageConfig
from headway.expconf._system_metrics import SystemMetricsConfig
from headway.expconf._yaml import check_depth, load_yaml

# Resource pool names appear in configs, the admin's pools file and messages: the same short
# token as storage location names.
RESOURCE_POOL_NAME = LOCATION_NAME


def check_resource_pool_name(value: str) -> str:
    """Return ``value`` if it is a well-formed resource pool name (``RESOURCE_POOL_NAME``).

    Raises:
        ValueError: naming the rule (pydantic validators turn it into a field error).
    """
    if not RESOURCE_POOL_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a pool name (letters, digits, '.', '_' or '-', starting with "
            "a letter or digit, at most 63 characters)"
        )
    return value


# ``package.module:ClassName`` -> a PyTorchTrial run by ``headway.exec.harness``.
_TRIAL_CLASS = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<cls>[A-Za-z_]\w*)$")
_PositiveInt = Annotated[int, Field(gt=0)]


class ResourcesConfig(StrictModel):
    """``resources``: what one trial needs from the cluster, and its place in the queue.

    ``slots_per_trial`` devices (GPUs, or CPU slots on hosts without GPUs): on one host when
    one is large enough, else the same number on each of several hosts (docs/distributed.md).
    Above 1 a ``module:Class`` entrypoint is started under ``headway.launch.torch_distributed``
    (one process per slot); a shell command must name the launcher itself, as in Determined.
    ``priority`` (Determined's, 1-99): smaller is scheduled first; runs of equal priority are
    placed in submission order. ``max_slots`` (Determined's): the most slots the experiment's
    trials hold at once; a run that would go over waits (others are placed past it).
    ``resource_pool`` (Determined's): the pool whose hosts run the trials; the pools are the
    admin's (``HEADWAY_RESOURCE_POOLS``), so the server checks the name at submission (a 400
    listing the known pools); here it is only a well-formed name.
    """

    slots_per_trial: Annotated[int, Field(ge=1)] = 1
    priority: Annotated[int, Field(ge=1, le=99)] = 42
    max_slots: Annotated[int, Field(ge=1)] | None = None
    resource_pool: str = "default"

    @field_validator("resource_pool")
    @classmethod
    def _check_resource_pool(cls, value: str) -> str:
        return check_resource_pool_name(value)

    @model_validator(mode="after")
    def _check_max_slots(self) -> ResourcesConfig:
        if self.max_slots is not None and self.max_slots < self.slots_per_trial:
            raise field_error(
                "max_slots",
                f"must be at least slots_per_trial ({self.slots_per_trial}), or no trial could "
                f"ever start; got {self.max_slots}",
            )
        return self


class ReproducibilityConfig(StrictModel):
    """``reproducibility.experiment_seed``: base seed of trial seeds; the server picks one if unset."""

    experiment_seed: Annotated[int, Field(ge=0, lt=2**32)] | None = None


class OptimizationsConfig(StrictModel):
    """``optimizations``: gradient aggregation of a PyTorchTrial (Determined's fields).

    ``aggregation_frequency``: batches whose gradients are accumulated per optimizer step
    (``pytorch.init(aggregation_frequency=)`` overrides it). ``average_aggregated_gradients``:
    divide the accumulated gradients by ``aggregation_frequency`` before stepping.
    """

    aggregation_frequency: Annotated[int, Field(ge=1)] = 1
    average_aggregated_gradients: bool = True


class ExperimentConfig(StrictModel):
    """A validated experiment config. Build it with ``parse_experiment_config``.

    Field reference with defaults: ``docs/config.md``. Lengths are ``Length`` models; the
    hyperparameter space maps names to hyperparameter models (nested groups are dicts).
    """

    name: Annotated[str, Field(min_length=1, max_length=128)] = "experiment"
    description: str = ""
    labels: list[str] = Field(default_factory=list)
    entrypoint: str | list[str]
    hyperparameters: dict[str, Hyperparameter] = Field(default_factory=dict)
    searcher: SearcherConfig
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    max_restarts: Annotated[int, Field(ge=0)] = 5
    # Headway's own (Determined re-queues such runs without a bound): see docs/lifecycle.md.
    max_lost_before_start: Annotated[int, Field(ge=1, le=100)] = 3
    checkpoint_storage: CheckpointStorageConfig | None = None
    min_validation_period: Length | None = None
    min_checkpoint_period: Length | None = None
    records_per_epoch: _PositiveInt | None = None
    scheduling_unit: _PositiveInt = 100
    reproducibility: ReproducibilityConfig = Field(default_factory=ReproducibilityConfig)
    optimizations: OptimizationsConfig = Field(default_factory=OptimizationsConfig)
    data: dict[str, Any] = Field(default_factory=dict)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    profiling: ProfilingConfig = Field(default_factory=ProfilingConfig)
    system_metrics: SystemMetricsConfig = Field(default_factory=SystemMetricsConfig)
    perform_initial_validation: bool = False
    log_policies: list[LogPolicy] = Field(default_factory=list)
    # Where the experiment lives (Determined's names): both or neither; the registry resolves
    # them (unknown or archived: a 400 naming the field). Neither: the default project.
    workspace: Annotated[str, Field(max_length=128)] | None = None
    project: Annotated[str, Field(max_length=128)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data: Any) -> Any:
        return reject_unsupported(data, UNSUPPORTED_TOP_LEVEL)

    @field_validator("workspace", "project")
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        # Determined writes "" for "not set"; a config exported from it means the default.
        return value or None

    @field_validator("min_validation_period", "min_checkpoint_period", mode="before")
    @classmethod
    def _zero_is_never(cls, value: Any) -> Any:
        return zero_length_is_never(value)

    @field_validator("entrypoint", mode="before")
    @classmethod
    def _entrypoint_form(cls, value: Any) -> Any:
        # Checked before the union so the message names the two forms, not pydantic's members.
        if isinstance(value, list):
            if not value or not all(isinstance(part, str) and part for part in value):
                raise ValueError("a list entrypoint must be a non-empty list of non-empty strings")
        elif not isinstance(value, str):
            raise ValueError(
                "must be a string (module:Class or a shell command) or a list of strings (argv)"
            )
        return value

    @field_validator("entrypoint")
    @classmethod
    def _check_entrypoint(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            return value  # an argv, run as given (no shell), as Determined runs a list
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        head = value.split(":", 1)[0]
        if " " not in value and ":" in value and head.endswith(".py"):
            raise ValueError(
                f"use a module path without '.py' for a trial class, e.g. "
                f"'{head[:-3].replace('/', '.')}:{value.split(':', 1)[1]}'"
            )
        return value

    @model_validator(mode="after")
    def _check_grid_counts(self) -> ExperimentConfig:
        # ``count`` means grid points: required with ``grid``; other searchers ignore it, as
        # Determined's do (docs/config.md says so). pydantic keeps one error per validator, so
        # the first offending field (sorted) is named.
        if getattr(self.searcher, "name", None) == "grid":
            for route, hp in range_hyperparameters(self.hyperparameters):
                if hp.count is None:
                    path = format_path(("hyperparameters", *route, "count"))
                    raise field_error(path, GRID_COUNT_REQUIRED)
        return self

    @model_validator(mode="after")
    def _check_trial_class_length(self) -> ExperimentConfig:
        # The harness runs Trainer.fit() with no max_length: it needs one from the config.
        searcher = self.searcher
        timed = getattr(searcher, "time_metric", None) in ("batches", "epochs")
        if self.entrypoint_trial_class is not None and searcher.max_length is None and not timed:
            raise field_error(
                "searcher.max_length",
                "required with a module:Class entrypoint (the harness trains each trial to it; "
                "adaptive_asha may give time_metric batches or epochs and max_time instead). "
                "A script entrypoint may leave it out and pass fit(max_length=...) itself",
            )
        return self

    @property
    def entrypoint_trial_class(self) -> tuple[str, str] | None:
        """``(module, class)`` when ``entrypoint`` is ``module:Class`` (a PyTorchTrial), else None.

        Anything else is a shell command (Core API script), e.g. ``python train.py --epochs 3``.
        """
        if isinstance(self.entrypoint, list):
            return None
        match = _TRIAL_CLASS.match(self.entrypoint)
        return (match["module"], match["cls"]) if match else None

    @property
    def entrypoint_text(self) -> str:
        """The entrypoint as one line (a list is shell-quoted), for logs and pages."""
        if isinstance(self.entrypoint, list):
            return shlex.join(self.entrypoint)
        return self.entrypoint

    def to_dict(self) -> dict[str, Any]:
        """The normalised, JSON-able config: defaults filled, lengths as ``{"batches": N}``,
        every hyperparameter in explicit ``{"type": ...}`` form (nested groups as mappings).
        ``parse_experiment_config(cfg.to_dict())`` gives an equal config."""
        return self.model_dump(mode="json")


def parse_experiment_config(data: dict[str, Any] | str) -> ExperimentConfig:
    """Validate an experiment config given as a mapping or YAML text.

    Arguments:
        data (dict | str): the config; a ``str`` is parsed as YAML.

    Returns:
        ExperimentConfig: validated, defaults filled in.

    Raises:
        ConfigError: ``errors`` maps each bad field's dotted path (``searcher.max_length``,
            ``hyperparameters.lr.maxval``, ``config`` for the whole document) to messages.
    """
    if isinstance(data, str):
        data = load_yaml(data)
    if not isinstance(data, dict):
        got = "an empty document" if data is None else type(data).__name__
        raise ConfigError.single("config", f"the config must be a mapping of fields, got {got}")
    check_depth(data)
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError.from_validation_error(exc, ExperimentConfig) from None
