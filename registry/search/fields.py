"""What each name in a filter means: a column of the trial or experiment, a hyperparameter,
or a metric series (docs/search.md lists them).

``resolve(name, target)`` answers a ``Field``; the compiler (``registry.search.compile``) turns
a field, an operator and values into a query. A bare name that is no built-in field is a metric
of the ``validation`` group (``validation_accuracy > 0.95``), as in W&B's run filters; a dotted
name must start with a known prefix, so ``hparam.lr`` (a typo) is an unknown field, not a
metric nobody reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from registry.models.search_value import hparam_key, metric_key


class Kind(StrEnum):
    """How a field compares (which operators and values it takes)."""

    INT = "int"
    FLOAT = "float"
    DATE = "date"
    TEXT = "text"
    STATE = "state"
    BOOL = "bool"
    LABEL_LIST = "label_list"  # Experiment.labels: a list of strings
    LABEL_KEYS = "label_keys"  # Trial.labels: a string-to-string mapping
    LABEL_VALUE = "label_value"  # one key of Trial.labels
    HPARAM = "hparam"
    METRIC = "metric"


class Target(StrEnum):
    TRIAL = "trial"
    EXPERIMENT = "experiment"


class UnknownField(ValueError):
    """The name is no field of the filtered resource: ``str()`` names it."""


@dataclass(frozen=True)
class Field:
    """A resolved name. ``path`` is the ORM lookup path on the trial for trial-level fields and
    on the experiment otherwise (``None`` for hyperparameters and metrics); ``key`` the side
    table's key (``registry.models.search_value``) and ``json`` the JSON path (column first)
    for hyperparameters, metrics and label values; ``trial_level`` marks a field an experiment
    filter evaluates on its trials."""

    name: str
    kind: Kind
    path: str | None = None
    key: str | None = None
    json: tuple[str, ...] = ()
    trial_level: bool = False


# Columns shared by both resources: name -> (kind, path on Trial, path on Experiment).
_TRIAL_COLUMNS: dict[str, tuple[Kind, str]] = {
    "id": (Kind.INT, "id"),
    "trial_id": (Kind.INT, "id"),
    "experiment_id": (Kind.INT, "experiment_id"),
    "state": (Kind.STATE, "state"),
    "owner": (Kind.TEXT, "experiment__owner__username"),
    "project": (Kind.TEXT, "experiment__project__name"),
    "workspace": (Kind.TEXT, "experiment__project__workspace__name"),
    "experiment_name": (Kind.TEXT, "experiment__name"),
    "labels": (Kind.LABEL_KEYS, "labels"),
    "start_time": (Kind.DATE, "created_at"),
    "end_time": (Kind.DATE, "ended_at"),
    "steps_completed": (Kind.INT, "steps_completed"),
    "restarts": (Kind.INT, "restarts"),
    "best_validation": (Kind.FLOAT, "best_validation"),
}

_EXPERIMENT_COLUMNS: dict[str, tuple[Kind, str]] = {
    "id": (Kind.INT, "id"),
    "experiment_id": (Kind.INT, "id"),
    "name": (Kind.TEXT, "name"),
    "experiment_name": (Kind.TEXT, "name"),
    "description": (Kind.TEXT, "description"),
    "state": (Kind.STATE, "state"),
    "owner": (Kind.TEXT, "owner__username"),
    "project": (Kind.TEXT, "project__name"),
    "workspace": (Kind.TEXT, "project__workspace__name"),
    "labels": (Kind.LABEL_LIST, "labels"),
    "start_time": (Kind.DATE, "created_at"),
    "end_time": (Kind.DATE, "ended_at"),
    "archived": (Kind.BOOL, "archived"),
    "best_validation": (Kind.FLOAT, "best_validation"),
}

# Of a trial's columns, those an experiment filter reaches through its trials.
_TRIAL_ONLY = ("trial_id", "steps_completed", "restarts")

# Metric prefixes: ``metrics.x`` and bare ``x`` are the validation series; ``training.x`` and
# ``validation.x`` name the group.
_METRIC_GROUPS = {"metrics": "validation", "validation": "validation", "training": "training"}

PREFIXES = ("hparams", "labels", *_METRIC_GROUPS)


def _trial_field(name: str) -> Field:
    if name in _TRIAL_COLUMNS:
        kind, path = _TRIAL_COLUMNS[name]
        return Field(name, kind, path=path)
    prefix, dot, rest = name.partition(".")
    if not dot:
        return Field(
            name,
            Kind.METRIC,
            key=metric_key("validation", name),
            json=("summary_metrics", "validation", name, "last"),
        )
    if not rest:
        raise UnknownField(f"Unknown field `{name}`: a name must follow `{prefix}.`.")
    if prefix == "hparams":
        return Field(name, Kind.HPARAM, key=hparam_key(rest), json=("hparams", *rest.split(".")))
    if prefix == "labels":
        return Field(name, Kind.LABEL_VALUE, path="labels", json=("labels", rest))
    if prefix in _METRIC_GROUPS:
        group = _METRIC_GROUPS[prefix]
        return Field(
            name,
            Kind.METRIC,
            # The side table holds the validation group only (migration 0028): other groups
            # are read from the JSON column.
            key=metric_key(group, rest) if group == "validation" else None,
            json=("summary_metrics", group, rest, "last"),
        )
    raise UnknownField(
        f"Unknown field `{name}`: a dotted name starts with one of "
        f"{', '.join(p + '.' for p in PREFIXES)} (`metrics.a.b` is the metric `a.b`)."
    )


def resolve(name: str, target: Target) -> Field:
    """The field ``name`` means in a filter of ``target`` (trials or experiments).

    Raises:
        UnknownField: a dotted name whose prefix is none of ``PREFIXES``, or a prefix with
            nothing after it.
    """
    if target is Target.TRIAL:
        return _trial_field(name)
    if name in _EXPERIMENT_COLUMNS:
        kind, path = _EXPERIMENT_COLUMNS[name]
        return Field(name, kind, path=path)
    field = _trial_field(name)
    if field.path is not None and name not in _TRIAL_ONLY and field.kind is not Kind.LABEL_VALUE:
        raise UnknownField(f"Unknown field `{name}` for experiments.")  # pragma: no cover
    return Field(field.name, field.kind, field.path, field.key, field.json, trial_level=True)
