"""Hyperparameter search space (Determined semantics) and sampling from it.

Forms, as in Determined's experiment config reference ("Hyperparameters"):

* a bare value (scalar or list) is a constant; a mapping without ``type`` is a nested group whose
  values are hyperparameters themselves (recursively);
* ``{type: const, val: X}``;
* ``{type: int, minval, maxval}`` -- an integer in ``[minval, maxval]``;
* ``{type: double, minval, maxval}`` -- a float in ``[minval, maxval]``;
* ``{type: log, base: 10, minval, maxval}`` -- ``base ** u`` with ``u`` in ``[minval, maxval]``;
* ``{type: categorical, vals: [...]}``.

Determined's ``count`` (grid points) is refused until there is a grid searcher.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError, model_validator
from typing_extensions import TypeAliasType

from headway.expconf._base import StrictModel, field_error, reject_unsupported, tagged_union
from headway.expconf._errors import ConfigError

# Finite floats only: NaN or infinite bounds can never be sampled meaningfully.
_Float = Annotated[float, Field(allow_inf_nan=False)]


class ConstHyperparameter(StrictModel):
    """A fixed value (any JSON value), e.g. ``global_batch_size: 32``."""

    type: Literal["const"] = "const"
    val: Any

    @model_validator(mode="before")
    @classmethod
    def _wrap_bare_value(cls, data: Any) -> Any:
        # A bare scalar or list in the config is shorthand for {type: const, val: ...}.
        return data if isinstance(data, dict | ConstHyperparameter) else {"val": data}


class _RangeHyperparameter(StrictModel):
    """Shared ``minval < maxval`` check (the error names ``maxval``); ``count`` is refused."""

    @model_validator(mode="before")
    @classmethod
    def _refuse_count(cls, data: Any) -> Any:
        return reject_unsupported(
            data,
            {"count": "grid points need the grid searcher; only 'single' exists; leave it out"},
        )

    @model_validator(mode="after")
    def _check_order(self) -> Any:
        minval, maxval = self.minval, self.maxval  # type: ignore[attr-defined]
        if not minval < maxval:
            raise field_error("maxval", f"must be greater than minval ({minval}), got {maxval}")
        return self


class IntHyperparameter(_RangeHyperparameter):
    """An integer sampled uniformly from ``[minval, maxval]`` (both ends included)."""

    type: Literal["int"]
    minval: int
    maxval: int


class DoubleHyperparameter(_RangeHyperparameter):
    """A float sampled uniformly from ``[minval, maxval]``."""

    type: Literal["double"]
    minval: _Float
    maxval: _Float


class LogHyperparameter(_RangeHyperparameter):
    """``base ** u`` with ``u`` uniform in ``[minval, maxval]`` (exponents, not values).

    ``{type: log, base: 10, minval: -4, maxval: -1}`` samples learning rates in [1e-4, 1e-1].
    """

    type: Literal["log"]
    base: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 10.0
    minval: _Float
    maxval: _Float

    @model_validator(mode="after")
    def _check_base(self) -> LogHyperparameter:
        if self.base == 1:
            raise field_error("base", "must not be 1 (every sample would be 1)")
        return self


class CategoricalHyperparameter(StrictModel):
    """One of ``vals``, each equally likely."""

    type: Literal["categorical"]
    vals: Annotated[list[Any], Field(min_length=1)]


def _kind_of_untyped(value: Any) -> str:
    # A mapping without "type" is a nested group; anything else is a bare constant.
    return "nested" if isinstance(value, dict) else "const"


if TYPE_CHECKING:
    # What the type checker sees; at run time the same members form a pydantic tagged union.
    Hyperparameter: TypeAlias = (
        ConstHyperparameter
        | IntHyperparameter
        | DoubleHyperparameter
        | LogHyperparameter
        | CategoricalHyperparameter
        | dict[str, "Hyperparameter"]
    )
else:
    Hyperparameter = TypeAliasType(
        "Hyperparameter",
        tagged_union(
            "hp",
            "type",
            {
                "const": ConstHyperparameter,
                "int": IntHyperparameter,
                "double": DoubleHyperparameter,
                "log": LogHyperparameter,
                "categorical": CategoricalHyperparameter,
                "nested": dict[str, "Hyperparameter"],
            },
            fallback=_kind_of_untyped,
            hidden=("nested",),
        ),
    )
"""One hyperparameter: one of the models above, or a nested ``dict[str, Hyperparameter]``."""

HyperparameterSpace = dict[str, Hyperparameter]
_SPACE_ADAPTER: TypeAdapter[dict[str, Any]] = TypeAdapter(HyperparameterSpace)


def parse_hyperparameters(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a raw ``hyperparameters`` mapping into models (nested groups stay dicts).

    Raises:
        ConfigError: with paths such as ``hyperparameters.lr.maxval``.
    """
    try:
        return _SPACE_ADAPTER.validate_python(dict(data))
    except ValidationError as exc:
        raise ConfigError.from_validation_error(exc, prefix=("hyperparameters",)) from None


def sample_hparams(hyperparameters: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """Draw one value per hyperparameter, as a random searcher does for a new trial.

    Arguments:
        hyperparameters (Mapping[str, Hyperparameter | Any]): a parsed space
            (``ExperimentConfig.hyperparameters``) or a raw one, which is validated first.
        rng (random.Random): the source of randomness; the same seed gives the same sample.

    Returns:
        dict: name -> value; nested groups come back as nested dicts, constants as their value
        (a deep copy, so callers may mutate it).

    Raises:
        ConfigError: when a raw space is invalid.
    """
    space = hyperparameters
    if not all(_is_parsed(value) for value in space.values()):
        space = parse_hyperparameters(space)
    return {name: _sample_one(hp, rng) for name, hp in space.items()}


def _is_parsed(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_is_parsed(v) for v in value.values())
    return isinstance(value, StrictModel)


def _sample_one(hp: Any, rng: random.Random) -> Any:
    if isinstance(hp, dict):
        return {name: _sample_one(sub, rng) for name, sub in hp.items()}
    if isinstance(hp, ConstHyperparameter):
        return copy.deepcopy(hp.val)
    if isinstance(hp, IntHyperparameter):
        return rng.randint(hp.minval, hp.maxval)
    if isinstance(hp, DoubleHyperparameter):
        return rng.uniform(hp.minval, hp.maxval)
    if isinstance(hp, LogHyperparameter):
        return hp.base ** rng.uniform(hp.minval, hp.maxval)
    if isinstance(hp, CategoricalHyperparameter):
        return copy.deepcopy(rng.choice(hp.vals))
    raise TypeError(f"not a hyperparameter: {hp!r}")
