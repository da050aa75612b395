"""Hyperparameter search space (Determined semantics) and sampling from it.

Forms, as in Determined's experiment config reference ("Hyperparameters"):

* a bare value (scalar or list) is a constant; a mapping without ``type`` is a nested group whose
  values are hyperparameters themselves (recursively);
* ``{type: const, val: X}``;
* ``{type: int, minval, maxval}`` -- an integer in ``[minval, maxval]``;
* ``{type: double, minval, maxval}`` -- a float in ``[minval, maxval]``;
* ``{type: log, base: 10, minval, maxval}`` -- ``base ** u`` with ``u`` in ``[minval, maxval]``;
* ``{type: categorical, vals: [...]}``.

``count`` on ``int``/``double``/``log`` is the number of grid points for the grid searcher
(``grid_points``); ``ExperimentConfig`` requires it with ``grid``; other searchers ignore it.
Names are visited in sorted order, as Determined does, so samples and grid points do not depend
on the key order a config (or a database's JSON column) happens to have.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError, model_validator
from typing_extensions import TypeAliasType

from headway.expconf._base import StrictModel, field_error, tagged_union
from headway.expconf._errors import ConfigError, format_path

# Finite floats only: NaN or infinite bounds can never be sampled meaningfully.
_Float = Annotated[float, Field(allow_inf_nan=False)]
# Grid points along one int/double/log axis (the grid searcher's ``count``).
_Count = Annotated[int, Field(ge=1)]
GRID_COUNT_REQUIRED = "required by the grid searcher"


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
    """Shared ``minval < maxval`` check (the error names ``maxval``).

    ``count`` (declared by each subclass, after the bounds) is the number of grid points.
    """

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
    count: _Count | None = None


class DoubleHyperparameter(_RangeHyperparameter):
    """A float sampled uniformly from ``[minval, maxval]``."""

    type: Literal["double"]
    minval: _Float
    maxval: _Float
    count: _Count | None = None


class LogHyperparameter(_RangeHyperparameter):
    """``base ** u`` with ``u`` uniform in ``[minval, maxval]`` (exponents, not values).

    ``{type: log, base: 10, minval: -4, maxval: -1}`` samples learning rates in [1e-4, 1e-1].
    """

    type: Literal["log"]
    base: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 10.0
    minval: _Float
    maxval: _Float
    count: _Count | None = None

    @model_validator(mode="after")
    def _check_base(self) -> LogHyperparameter:
        if self.base == 1:
            raise field_error("base", "must not be 1 (every sample would be 1)")
        # Every sample lies between base**minval and base**maxval: both must be floats
        # (`maxval: 1000` overflowed at sampling time, an OverflowError).
        for bound in ("minval", "maxval"):
            try:
                self.base ** getattr(self, bound)
            except OverflowError:
                raise field_error(
                    bound, f"base ** {bound} is beyond a 64-bit float (base {self.base})"
                ) from None
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
        rng (random.Random): the source of randomness; the same seed gives the same sample
            whatever the order of the names in the space (they are drawn in sorted order).

    Returns:
        dict: name -> value; nested groups come back as nested dicts, constants as their value
        (a deep copy, so callers may mutate it). ``count`` plays no part in sampling.

    Raises:
        ConfigError: when a raw space is invalid.
    """
    space = _parsed(hyperparameters)
    return {name: _sample_one(space[name], rng) for name in sorted(space)}


def _parsed(space: Mapping[str, Any]) -> dict[str, Any]:
    if all(_is_parsed(value) for value in space.values()):
        return dict(space)
    return parse_hyperparameters(space)


def _is_parsed(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_is_parsed(v) for v in value.values())
    return isinstance(value, StrictModel)


def _sample_one(hp: Any, rng: random.Random) -> Any:
    if isinstance(hp, dict):
        return {name: _sample_one(hp[name], rng) for name in sorted(hp)}
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


_RangeTypes = IntHyperparameter | DoubleHyperparameter | LogHyperparameter


def range_hyperparameters(
    hyperparameters: Mapping[str, Any], route: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], _RangeTypes]]:
    """Yield ``(route, hp)`` for every int/double/log hyperparameter of a parsed space, in sorted
    order; ``route`` is the path of names, e.g. ``("optimizer", "lr")``."""
    for name in sorted(hyperparameters):
        hp = hyperparameters[name]
        if isinstance(hp, dict):
            yield from range_hyperparameters(hp, (*route, name))
        elif isinstance(hp, _RangeTypes):
            yield (*route, name), hp


# One axis of the grid: the route to a hyperparameter and every value it takes.
_Axis = tuple[tuple[str, ...], list[Any]]


def grid_size(hyperparameters: Mapping[str, Any]) -> int:
    """The number of grid points (``len(grid_points(space))`` without building them).

    Raises:
        ConfigError: a raw space is invalid, or an int/double/log hyperparameter has no
            ``count`` (``hyperparameters.<name>.count: required by the grid searcher``).
    """
    return math.prod(len(values) for _, values in _grid_axes(_parsed(hyperparameters), ()))


def grid_point(hyperparameters: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Point ``index`` (0-based) of ``grid_points(space)``, built without building the others."""
    axes = _grid_axes(_parsed(hyperparameters), ())
    size = math.prod(len(values) for _, values in axes)
    if not 0 <= index < size:
        raise IndexError(f"grid point {index} out of range (the grid has {size} points)")
    chosen: list[Any] = []
    for _, values in reversed(axes):  # the last axis varies fastest
        index, position = divmod(index, len(values))
        chosen.append(values[position])
    return _assemble(axes, reversed(chosen))


def grid_points(hyperparameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid over a space, as Determined's grid searcher builds it.

    One axis per hyperparameter (nested groups contribute one axis per member):

    * ``int``: ``count`` evenly spaced values from ``minval`` to ``maxval``, rounded half away
      from zero; ``count`` is clamped to the number of integers in the range, and ``count: 1``
      gives the rounded midpoint;
    * ``double``: ``count`` evenly spaced values from ``minval`` to ``maxval`` (both included);
      ``count: 1`` gives the midpoint;
    * ``log``: ``base ** e`` for ``count`` evenly spaced exponents ``e`` (``count: 1``: the mid
      exponent);
    * ``categorical``: every value; ``const``: its value; an empty nested group: ``{}``.

    The points are the cartesian product of the axes, taken in sorted name order (nested names
    as paths) with the last axis varying fastest. A space without hyperparameters has one point,
    ``{}``. Values are deep copies.

    Raises:
        ConfigError: as ``grid_size``.
    """
    axes = _grid_axes(_parsed(hyperparameters), ())
    return [_assemble(axes, combo) for combo in itertools.product(*(v for _, v in axes))]


def _assemble(axes: list[_Axis], values: Any) -> dict[str, Any]:
    point: dict[str, Any] = {}
    for (route, _), value in zip(axes, values, strict=True):
        group = point
        for name in route[:-1]:
            group = group.setdefault(name, {})
        group[route[-1]] = copy.deepcopy(value)
    return point


def _grid_axes(space: Mapping[str, Any], route: tuple[str, ...]) -> list[_Axis]:
    axes: list[_Axis] = []
    for name in sorted(space):
        hp, here = space[name], (*route, name)
        if isinstance(hp, dict):
            axes.extend(_grid_axes(hp, here) if hp else [(here, [{}])])
        else:
            axes.append((here, _axis_values(hp, here)))
    return axes


def _axis_values(hp: Any, route: tuple[str, ...]) -> list[Any]:
    if isinstance(hp, ConstHyperparameter):
        return [hp.val]
    if isinstance(hp, CategoricalHyperparameter):
        return list(hp.vals)
    if not isinstance(hp, _RangeTypes):
        raise TypeError(f"not a hyperparameter: {hp!r}")
    if hp.count is None:
        path = format_path(("hyperparameters", *route, "count"))
        raise ConfigError.single(path, GRID_COUNT_REQUIRED)
    if isinstance(hp, IntHyperparameter):
        count = min(hp.count, hp.maxval - hp.minval + 1)
        values = [_round_half_away(x) for x in _spaced(hp.minval, hp.maxval, count)]
        return list(dict.fromkeys(values))  # distinct already; kept in order regardless
    exponents = _spaced(hp.minval, hp.maxval, hp.count)
    if isinstance(hp, LogHyperparameter):
        return [hp.base**e for e in exponents]
    return exponents


def _spaced(lo: float, hi: float, count: int) -> list[float]:
    # Determined's formula (lo + i * (hi - lo) / (count - 1)); the last point is hi exactly.
    if count == 1:
        return [(lo + hi) / 2]
    return [lo + i * (hi - lo) / (count - 1) for i in range(count - 1)] + [hi]


def _round_half_away(x: float) -> int:
    # Go's math.Round, which Determined uses; Python's round() rounds half to even.
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def flatten_hparams(hparams: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested hyperparameters (values, not a search space) as ``("optimizer.lr", 0.1)`` pairs:
    dotted names, sorted at each level as the search space is visited; an empty group is one pair."""
    if not isinstance(hparams, dict):
        return [(prefix, hparams)] if prefix else []
    out: list[tuple[str, Any]] = []
    for key in sorted(hparams):
        path = f"{prefix}.{key}" if prefix else str(key)
        value = hparams[key]
        if isinstance(value, dict) and value:
            out.extend(flatten_hparams(value, path))
        else:
            out.append((path, value))
    return out
