"""Training-length units: ``Batch(n)`` and ``Epoch(n)`` (Determined's ``pytorch.TrainUnit``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headway.expconf import Length, Unit


class TrainUnit:
    """A length or period of training, counted in batches or epochs.

    Arguments:
        value (int | Iterable[int]): a positive count (``Batch(100)``: every 100 batches, or a
            length of 100 batches) or, as a period, an explicit list of points
            (``Batch([2, 5])``: at batch 2 and batch 5 only).

    Raises ``ValueError`` for a non-positive count or an empty list. Same idea as Determined's
    ``determined.pytorch.Batch`` / ``Epoch`` (``pytorch/_trainer_utils.py``).
    """

    unit_name = "units"

    def __init__(self, value: int | Iterable[int]) -> None:
        if isinstance(value, bool):
            raise ValueError(f"{type(self).__name__} needs an int or a list of ints, got {value!r}")
        if isinstance(value, int):
            if value <= 0:
                raise ValueError(f"{type(self).__name__}({value}): the value must be positive")
            self.value: int | list[int] = value
            self._points: frozenset[int] | None = None
        else:
            points = sorted(int(v) for v in value)
            if not points or points[0] <= 0:
                raise ValueError(f"{type(self).__name__}({value!r}): need positive points")
            self.value = points
            self._points = frozenset(points)

    def is_due(self, count: int) -> bool:
        """True when ``count`` completed units hit this period (a multiple or a listed point)."""
        if self._points is not None:
            return count in self._points
        return count > 0 and count % self.value == 0  # type: ignore[operator]

    def length(self) -> int:
        """The unit count meant as a length (the last point for a list)."""
        return self.value if isinstance(self.value, int) else self.value[-1]

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self.value)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"


class Batch(TrainUnit):
    """A number of batches (per slot: one optimizer step per ``train_batch`` call)."""

    unit_name = "batches"


class Epoch(TrainUnit):
    """A number of passes over the training data loader."""

    unit_name = "epochs"


def unit_from_config(value: Any, field: str, global_batch_size: int | None) -> TrainUnit | None:
    """Turn an experiment-config length like ``{"batches": 500}`` into a ``TrainUnit``.

    ``{"records": n}`` becomes ``Batch(ceil(n / global_batch_size))``. ``None`` stays None.

    Raises:
        ConfigError: (a ``ValueError``) naming ``field`` for anything that is not a length, or
            ``hyperparameters.global_batch_size`` when records need it.
    """
    if value is None:
        return None
    length = Length.parse(value, field)
    if length.unit is Unit.EPOCHS:
        return Epoch(length.value)
    return Batch(
        length.to_batches(records_per_epoch=None, global_batch_size=global_batch_size, field=field)
    )
