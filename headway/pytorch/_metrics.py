"""Metric reduction: averaging per-batch training metrics, validation reducers, ``MetricReducer``.

Per-batch work is kept tiny on purpose (the harness budget is a few tens of microseconds per
batch): train_batch outputs are only detached and appended; they are stacked and averaged once per
report. Determined documents the same reducers (``determined.pytorch.Reducer``, ``MetricReducer``,
``PyTorchTrialContext.wrap_reducer``).
"""

from __future__ import annotations

import abc
import enum
import itertools
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

_Path = tuple[str, ...]
# Metric values that are never nested dicts (reduce_metrics' fast path).
_LEAF_TYPES = frozenset({torch.Tensor, float, int})


class Reducer(enum.Enum):
    """Built-in ways to combine a validation metric over batches (``evaluation_reducer()``).

    ``AVG``: mean weighted by batch length; ``SUM``; ``MAX``; ``MIN``.
    """

    AVG = "avg"
    SUM = "sum"
    MAX = "max"
    MIN = "min"


class MetricReducer(abc.ABC):
    """A user-defined metric that the harness resets, reduces per slot, then across slots.

    Register it with ``context.wrap_reducer(reducer, name=...)``. ``update`` is yours to define
    and call from ``train_batch`` / ``evaluate_batch``.

    - ``reset()``: called before each validation (and after each training report).
    - ``per_slot_reduce() -> Any``: this slot's partial result (picklable).
    - ``cross_slot_reduce(per_slot_metrics: list) -> Any``: the final value, or a dict of
      ``{name: value}`` when the reducer was wrapped without a name.
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget everything accumulated so far."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """Return this slot's partial result."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: Sequence[Any]) -> Any:
        """Combine all slots' partial results into the metric value."""


class _FunctionReducer(MetricReducer):
    """Wraps a plain ``fn(values: list) -> Any`` passed to ``wrap_reducer``; call ``update(v)``."""

    def __init__(self, fn: Callable[[list[Any]], Any]) -> None:
        self._fn = fn
        self._values: list[Any] = []

    def update(self, value: Any) -> None:
        """Record one value (any picklable object)."""
        self._values.append(value)

    def reset(self) -> None:
        self._values = []

    def per_slot_reduce(self) -> list[Any]:
        return self._values

    def cross_slot_reduce(self, per_slot_metrics: Sequence[Any]) -> Any:
        # Interleave the slots (rank 0's first value, rank 1's first, ...) so that sharded
        # batches come back in dataset order when every slot updates once per batch.
        flat = [
            v
            for group in itertools.zip_longest(*per_slot_metrics, fillvalue=_MISSING)
            for v in group
            if v is not _MISSING
        ]
        return self._fn(flat)


_MISSING = object()
_Wrapped = tuple[MetricReducer, str | None, bool, bool]


def _reducer_label(reducer: MetricReducer, name: str | None) -> str:
    if isinstance(reducer, _FunctionReducer):
        return f"reducer function {getattr(reducer._fn, '__name__', repr(reducer._fn))}()"
    return f"MetricReducer {type(reducer).__name__} (name={name!r})"


def run_reducers(
    wrapped: Sequence[_Wrapped], allgather: Callable[[Any], list[Any]], *, training: bool
) -> dict[str, Any]:
    """Reduce the custom reducers registered for training (or validation) and reset them.

    One ``allgather`` of every reducer's ``per_slot_reduce()``, then ``cross_slot_reduce`` on
    each; a reducer wrapped with ``name`` gives that metric, one wrapped without gives a dict of
    metrics. Every rank must call this (it is a collective when there are several slots).

    Raises:
        ValueError: naming the reducer, when one of its methods fails, when a named reducer
            returns a dict, or an unnamed one returns something else (Determined's rules,
            ``_PyTorchReducerContext.run_cross_slot_reduction``).
    """
    active = [w for w in wrapped if (w[2] if training else w[3])]
    if not active:
        return {}
    partials = []
    for reducer, name, _, _ in active:
        try:
            partials.append(reducer.per_slot_reduce())
        except Exception as exc:
            raise ValueError(
                f"{_reducer_label(reducer, name)} failed in per_slot_reduce()"
            ) from exc
    gathered = allgather(partials)
    out: dict[str, Any] = {}
    for index, (reducer, name, _, _) in enumerate(active):
        label = _reducer_label(reducer, name)
        try:
            value = reducer.cross_slot_reduce([slot[index] for slot in gathered])
            reducer.reset()
        except Exception as exc:
            raise ValueError(f"{label} failed in cross_slot_reduce() or reset()") from exc
        if name is None:
            if not isinstance(value, dict):
                raise ValueError(
                    f"{label} was wrapped with name=None, so it must return a dict of "
                    f"{{metric name: value}}, but it returned a {type(value).__name__}; pass "
                    "wrap_reducer(..., name=...) for a single metric"
                )
            out.update(value)
        else:
            if isinstance(value, dict):
                raise ValueError(
                    f"{label} was wrapped with name={name!r} but returned a dict; leave "
                    "name=None to return several metrics as a dict"
                )
            out[name] = value
    return out


def plain_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """``evaluate_full_dataset``'s dict with tensors / ndarrays turned into Python values.

    Nothing is averaged: ints stay ints and strings stay strings; a one-element tensor becomes
    its number, others a (nested) list. Nested dicts are converted too.
    """
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            out[key] = value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()
        elif isinstance(value, np.ndarray | np.generic):
            out[key] = value.item() if value.size == 1 and value.ndim == 0 else value.tolist()
        elif isinstance(value, dict):
            out[key] = plain_metrics(value)
        else:
            out[key] = value
    return out


def _flatten(metrics: Mapping[str, Any], prefix: _Path, out: dict[_Path, Any]) -> None:
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric names must be strings, got {key!r}")
        if isinstance(value, Mapping):
            _flatten(value, (*prefix, key), out)
        else:
            out[(*prefix, key)] = value


def _unflatten(flat: Mapping[_Path, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64)
    if isinstance(value, np.ndarray | np.generic | numbers.Number):
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    if isinstance(value, list | tuple):
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    raise TypeError(f"metric {name!r}: cannot average a {type(value).__name__} ({value!r})")


def _python(value: torch.Tensor) -> float | list[Any]:
    return value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()


def _stack_alike(values: list[Any]) -> torch.Tensor | None:
    """``values`` stacked as one float64 CPU tensor when all are tensors of one dtype, shape
    and device (what ``train_batch`` returns batch after batch), else None.

    One stack, one cast and one device-to-host copy for the whole column instead of one of each
    per value: a training report of 100 batches took ~1.4 ms that way (14 us a batch on the
    tiny MLP of bench/harness_overhead.py), and on a GPU each per-value copy was a sync.
    Casting after stacking gives the same float64 values as casting each value first.
    """
    first = values[0]
    if type(first) is not torch.Tensor:
        return None
    dtype, shape, device = first.dtype, first.shape, first.device
    for value in values:
        if (
            type(value) is not torch.Tensor
            or value.dtype != dtype
            or value.shape != shape
            or value.device != device
        ):
            return None
    return torch.stack(values).detach().to(torch.float64).cpu()


def _reduce_leaf(
    values: list[Any], weights: list[float], reducer: Reducer, name: str
) -> float | list[Any]:
    if all(type(v) in (float, int) for v in values):
        # Plain Python numbers (``loss.item()``): no tensor round trip.
        if reducer is Reducer.AVG:
            avg: float = sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)
            return avg
        if reducer is Reducer.SUM:
            return float(sum(values))
        return float(max(values) if reducer is Reducer.MAX else min(values))
    stacked = _stack_alike(values)
    if stacked is None:
        try:
            stacked = torch.stack([_as_tensor(v, name).cpu() for v in values])
        except RuntimeError as exc:
            raise ValueError(
                f"metric {name!r}: values have different shapes across batches"
            ) from exc
    if reducer is Reducer.AVG:
        w = torch.tensor(weights, dtype=torch.float64).reshape(-1, *([1] * (stacked.dim() - 1)))
        return _python((stacked * w).sum(0) / w.sum())
    if reducer is Reducer.SUM:
        return _python(stacked.sum(0))
    if reducer is Reducer.MAX:
        return _python(stacked.max(0).values)
    return _python(stacked.min(0).values)


def reduce_metrics(
    batches: Sequence[Mapping[str, Any]],
    weights: Sequence[float] | None = None,
    reducers: Reducer | Mapping[str, Reducer] = Reducer.AVG,
) -> dict[str, Any]:
    """Combine per-batch metric dicts into one dict of Python numbers (or lists).

    Arguments:
        batches (list[dict]): each ``{name: tensor | number | ndarray | nested dict}``; a name
            may be missing from some batches (it is combined over the batches that have it).
        weights (list[float] | None): per-batch weights for ``AVG`` (batch lengths); None -> 1.
        reducers (Reducer | dict[str, Reducer]): one reducer for all names or per top-level name.

    Scalars become ``float``; non-scalar tensors are combined element-wise and returned as lists.
    Raises ``TypeError``/``ValueError`` naming the metric for values that cannot be combined.
    """
    if weights is None:
        weights = [1.0] * len(batches)
    columns: dict[_Path, tuple[list[Any], list[float]]] = {}
    leaves: Iterable[tuple[_Path, Any]]
    for metrics, weight in zip(batches, weights, strict=True):
        w = float(weight)
        for key, value in metrics.items():
            # Runs once per metric per batch at every report: a top-level tensor or number
            # skips _flatten (its Mapping check alone cost ~1 us a value).
            if type(key) is str and type(value) in _LEAF_TYPES:
                leaves = (((key,), value),)
            else:
                flat: dict[_Path, Any] = {}
                _flatten({key: value}, (), flat)
                leaves = flat.items()
            for path, leaf in leaves:
                column = columns.get(path)
                if column is None:
                    column = columns[path] = ([], [])
                column[0].append(leaf)
                column[1].append(w)
    out: dict[_Path, Any] = {}
    for path, (vals, ws) in columns.items():
        name = ".".join(path)
        reducer = reducers if isinstance(reducers, Reducer) else reducers.get(path[0], Reducer.AVG)
        out[path] = _reduce_leaf(vals, ws, reducer, name)
    return _unflatten(out)


def combine_slots(
    per_slot: Sequence[tuple[dict[str, Any], float]],
    reducers: Reducer | Mapping[str, Reducer] = Reducer.AVG,
) -> dict[str, Any]:
    """Combine each slot's reduced metrics ``(metrics, total_weight)`` into the final metrics."""
    return reduce_metrics([m for m, _ in per_slot], [w for _, w in per_slot], reducers)


def detach_metrics(metrics: Any) -> dict[str, Any]:
    """Return ``train_batch``'s dict with tensors detached, so no autograd graph is kept alive.

    A bare tensor is the loss: it becomes ``{"loss": tensor}`` (as in Determined's
    ``_PyTorchTrialController._train_batch``). Raises ``TypeError`` for anything else that is
    not a dict.
    """
    if type(metrics) is not dict:
        if isinstance(metrics, torch.Tensor):
            return {"loss": metrics.detach()}
        if isinstance(metrics, Mapping):
            metrics = dict(metrics)
        else:
            raise TypeError(
                "train_batch must return a dict of metrics or a loss tensor, got "
                f"{type(metrics).__name__}"
            )
    for key, value in metrics.items():
        if type(value) is torch.Tensor and value.requires_grad:
            metrics[key] = value.detach()
        elif isinstance(value, Mapping):
            metrics[key] = detach_metrics(value)
    detached: dict[str, Any] = metrics
    return detached
