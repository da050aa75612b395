"""``Length``: a training length in batches, epochs or records, and its conversion to batches."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator
from pydantic_core import PydanticCustomError

from headway.expconf._errors import ConfigError

Unit = Literal["batches", "epochs", "records"]
UNITS: tuple[str, ...] = ("batches", "epochs", "records")
_FORMS = "{batches: N}, {epochs: N}, {records: N} or a bare integer (batches)"


class Length(BaseModel):
    """A length of training, e.g. ``searcher.max_length`` (Determined's ``Length``).

    Config spellings: ``{batches: N}``, ``{epochs: N}``, ``{records: N}``, or a bare integer,
    which means batches (Determined's scheduling unit). Serialises back to ``{unit: value}``.

    Attributes:
        unit (str): ``"batches"``, ``"epochs"`` or ``"records"``.
        value (int): a positive count of that unit.
    """

    model_config = ConfigDict(frozen=True, strict=True)

    unit: Unit
    value: int = Field(gt=0)

    @model_validator(mode="before")
    @classmethod
    def _from_config(cls, data: Any) -> Any:
        if isinstance(data, Length):
            return data
        if isinstance(data, int) and not isinstance(data, bool):
            unit, value = "batches", data
        elif isinstance(data, dict) and set(data) == {"unit", "value"}:
            unit, value = data["unit"], data["value"]
        elif isinstance(data, dict) and len(data) == 1 and next(iter(data)) in UNITS:
            unit, value = next(iter(data.items()))
        else:
            raise PydanticCustomError(
                "length_form", "must be one of {forms}; got {got}", {"forms": _FORMS, "got": data}
            )
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise PydanticCustomError(
                "length_value",
                "{unit} must be a positive integer, got {got}",
                {"unit": unit, "got": value},
            )
        return {"unit": unit, "value": value}

    @model_serializer
    def _to_config(self) -> dict[str, int]:
        return {self.unit: self.value}

    def __str__(self) -> str:
        return f"{self.value} {self.unit}"


def length_to_batches(
    length: Length,
    *,
    records_per_epoch: int | None,
    global_batch_size: int | None,
    field: str = "length",
) -> int:
    """Convert a ``Length`` into a number of batches.

    ``records`` -> ``ceil(records / global_batch_size)``; ``epochs`` ->
    ``ceil(epochs * records_per_epoch / global_batch_size)``. Rounding up (Determined truncates)
    keeps a positive length positive and matches a data loader that keeps its last, partial batch.

    Arguments:
        length (Length): the length to convert.
        records_per_epoch (int | None): the config's ``records_per_epoch``; needed for epochs.
        global_batch_size (int | None): the ``global_batch_size`` hyperparameter; needed for
            epochs and records.
        field (str): dotted name of the length in the config, used in error messages.

    Raises:
        ConfigError: naming ``records_per_epoch`` or ``hyperparameters.global_batch_size`` when
            the conversion needs a value that is missing or not a positive integer.
    """
    if length.unit == "batches":
        return length.value
    _require_positive(global_batch_size, "hyperparameters.global_batch_size", length, field)
    assert global_batch_size is not None
    if length.unit == "records":
        return math.ceil(length.value / global_batch_size)
    _require_positive(records_per_epoch, "records_per_epoch", length, field)
    assert records_per_epoch is not None
    return math.ceil(length.value * records_per_epoch / global_batch_size)


def _require_positive(value: int | None, name: str, length: Length, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError.single(
            name,
            f"a positive integer is required to convert {field} ({length}) into batches,"
            f" got {value!r}",
        )
