"""Training lengths: the one definition of ``Unit``, ``Length`` and their conversion to batches.

Everything that reads a length from a config, an API body or a CLI flag (``searcher.max_length``,
``min_validation_period``, ``trial continue --max-length``, ``core.init(max_length=)``) parses it
with ``Length.parse`` and converts it with ``Length.to_batches`` / ``Length.batches_per_unit``.
"""

from __future__ import annotations

import enum
import math
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from headway.expconf._errors import ConfigError


class Unit(enum.StrEnum):
    """Unit of a length; equal to its config key (``Unit.BATCHES == "batches"``).

    Determined's ``core.Unit`` (EPOCHS, RECORDS, BATCHES).
    """

    EPOCHS = "epochs"
    RECORDS = "records"
    BATCHES = "batches"


UNITS: tuple[str, ...] = tuple(unit.value for unit in Unit)
_FORMS = "{batches: N}, {epochs: N}, {records: N} or a bare integer (batches)"


def _unit_and_value(data: Any) -> tuple[str, Any] | None:
    """Split a config spelling into ``(unit, value)``; None when the shape is not a length."""
    if isinstance(data, int) and not isinstance(data, bool):
        return Unit.BATCHES.value, data
    if isinstance(data, dict) and set(data) == {"unit", "value"}:
        return data["unit"], data["value"]
    if isinstance(data, dict) and len(data) == 1 and next(iter(data)) in UNITS:
        unit, value = next(iter(data.items()))
        return str(unit), value
    return None


class Length(BaseModel):
    """A length of training, e.g. ``searcher.max_length`` (Determined's ``Length``).

    Config spellings: ``{batches: N}``, ``{epochs: N}``, ``{records: N}``, or a bare integer,
    which means batches (Determined's scheduling unit). Serialises back to ``{unit: value}``;
    ``str()`` gives ``"N unit"``.

    Attributes:
        unit (Unit): batches, epochs or records.
        value (int): a positive count of that unit.
    """

    model_config = ConfigDict(frozen=True, strict=True)

    unit: Unit
    # The registry stores lengths in 64-bit columns: a larger one is a config error, not an
    # overflow when the trial is saved.
    value: int = Field(gt=0, le=2**63 - 1)

    @model_validator(mode="before")
    @classmethod
    def _from_config(cls, data: Any) -> Any:
        if isinstance(data, Length):
            return data
        parts = _unit_and_value(data)
        if parts is None:
            raise PydanticCustomError(
                "length_form", "must be one of {forms}; got {got}", {"forms": _FORMS, "got": data}
            )
        unit, value = parts
        if unit not in UNITS:
            raise PydanticCustomError(
                "length_unit",
                "unit must be one of {units}; got {got}",
                {"units": UNITS, "got": unit},
            )
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise PydanticCustomError(
                "length_value",
                "{unit} must be a positive integer, got {got}",
                {"unit": unit, "got": str(value)},
            )
        return {"unit": Unit(unit), "value": value}

    @classmethod
    def parse(cls, data: Any, field: str = "length") -> Length:
        """Parse a length in any config spelling.

        Arguments:
            data: ``{unit: N}``, ``{"unit": ..., "value": N}``, a bare int (batches) or a Length.
            field (str): dotted name used in the error message.

        Raises:
            ConfigError: naming ``field`` when ``data`` is not a length.
        """
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError.single(field, exc.errors()[0]["msg"]) from None

    @model_serializer
    def _to_config(self) -> dict[str, int]:
        return {self.unit.value: self.value}

    def __str__(self) -> str:
        return f"{self.value} {self.unit.value}"

    def batches_per_unit(
        self, *, batches_per_epoch: int | None, global_batch_size: int | None, field: str = "length"
    ) -> float:
        """How many batches one unit of this length is (1 for batches).

        ``epochs`` -> ``batches_per_epoch``; ``records`` -> ``1 / global_batch_size``.

        Raises:
            ConfigError: naming what is missing (the epoch length, or
                ``hyperparameters.global_batch_size``).
        """
        if self.unit is Unit.BATCHES:
            return 1.0
        if self.unit is Unit.RECORDS:
            gbs = _require_positive(
                global_batch_size, "hyperparameters.global_batch_size", self, field
            )
            return 1.0 / gbs
        per_epoch = _require_positive(batches_per_epoch, "records_per_epoch", self, field)
        return float(per_epoch)

    def to_batches(
        self, *, records_per_epoch: int | None, global_batch_size: int | None, field: str = "length"
    ) -> int:
        """This length in batches.

        ``records`` -> ``ceil(records / global_batch_size)``; ``epochs`` ->
        ``ceil(epochs * records_per_epoch / global_batch_size)``. Rounding up (Determined
        truncates) keeps a positive length positive and matches a data loader that keeps its last,
        partial batch.

        Arguments:
            records_per_epoch (int | None): the config's ``records_per_epoch``; needed for epochs.
            global_batch_size (int | None): the ``global_batch_size`` hyperparameter; needed for
                epochs and records.
            field (str): dotted name of the length in the config, used in error messages.

        Raises:
            ConfigError: naming ``records_per_epoch`` or ``hyperparameters.global_batch_size`` when
                the conversion needs a value that is missing or not a positive integer.
        """
        if self.unit is Unit.BATCHES:
            return self.value
        gbs = _require_positive(global_batch_size, "hyperparameters.global_batch_size", self, field)
        if self.unit is Unit.RECORDS:
            return math.ceil(self.value / gbs)
        records = _require_positive(records_per_epoch, "records_per_epoch", self, field)
        return math.ceil(self.value * records / gbs)


def length_to_batches(
    length: Length,
    *,
    records_per_epoch: int | None,
    global_batch_size: int | None,
    field: str = "length",
) -> int:
    """``length.to_batches(...)`` as a function (see ``Length.to_batches``)."""
    return length.to_batches(
        records_per_epoch=records_per_epoch, global_batch_size=global_batch_size, field=field
    )


def _require_positive(value: Any, name: str, length: Length, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError.single(
            name,
            f"a positive integer is required to convert {field} ({length}) into batches,"
            f" got {value!r}",
        )
    return value
