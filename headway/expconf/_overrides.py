"""Parse "continue trial" overrides: ``NAME=VALUE`` hyperparameters and ``max_length`` values.

The one definition, shared by ``headway trial continue`` (``headway.cli`` re-exports these names)
and the dashboard's "Continue trial" form, so both read the same text the same way. It lives with
the config schema because it reads values with the config loader (``load_yaml``, ``Length``) and so
that the dashboard need not import the CLI.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from headway.expconf._errors import ConfigError
from headway.expconf._length import Length
from headway.expconf._yaml import load_yaml


class OverrideError(ValueError):
    """An override cannot be parsed; the message quotes the offending text."""


def parse_hparam_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``NAME=VALUE`` items into a (nested) hyperparameter dict.

    Values are YAML scalars read with the config loader (``lr=0.01`` -> float, ``lr=1e-3`` ->
    float, ``layers=3`` -> int, ``opt=adam`` -> str, ``dropout=null`` -> None; a flow mapping such
    as ``optimizer={name: adam}`` also works). A dotted name sets a value inside a nested
    hyperparameter group: ``optimizer.lr=0.1`` -> ``{"optimizer": {"lr": 0.1}}``; see
    ``merge_hparam_overrides`` to keep the group's other values. Blank items are skipped, and a
    later item overrides an earlier one.

    Arguments:
        items (Iterable[str]): e.g. ``["lr=0.01", "optimizer.momentum=0.9"]``.

    Returns:
        dict[str, Any]: the overrides, nested by the dotted names.

    Raises:
        OverrideError: an item has no ``=``, an empty name part, or a malformed YAML value.
    """
    out: dict[str, Any] = {}
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        name, sep, text = item.partition("=")
        parts = [part.strip() for part in name.split(".")]
        if not sep or not all(parts):
            raise OverrideError(f"hyperparameter {item!r}: expected NAME=VALUE, e.g. lr=0.01")
        try:
            value = load_yaml(text.strip()) if text.strip() else None
        except ConfigError as exc:
            message = "; ".join(m for ms in exc.errors.values() for m in ms)
            raise OverrideError(f"hyperparameter {parts[-1]!r}: {message}") from None
        group = out
        for part in parts[:-1]:
            if not isinstance(group.get(part), dict):
                group[part] = {}
            group = group[part]
        group[parts[-1]] = value
    return out


def merge_hparam_overrides(
    current: Mapping[str, Any], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The top-level groups to send so that nested overrides keep a group's other values.

    The registry replaces each top-level hyperparameter it is given (Determined's continue
    trial does the same), so ``{"optimizer": {"lr": 0.1}}`` would drop ``optimizer.name``.
    Merging into the trial's ``current`` group first keeps it.

    Arguments:
        current (Mapping[str, Any]): the source trial's hyperparameters.
        overrides (Mapping[str, Any]): from ``parse_hparam_overrides``.

    Returns:
        dict[str, Any]: one entry per overridden top-level name; ``current`` is not modified.
    """

    def merge(base: Any, new: Any) -> Any:
        if not (isinstance(base, dict) and isinstance(new, dict)):
            return copy.deepcopy(new)
        merged = copy.deepcopy(base)
        for key, value in new.items():
            merged[key] = merge(base.get(key), value)
        return merged

    return {name: merge(current.get(name), value) for name, value in overrides.items()}


def parse_max_length(text: str) -> int | dict[str, int]:
    """Parse a ``max_length`` override: ``N`` (batches) or ``UNIT=N`` (batches|epochs|records).

    Returns:
        int | dict[str, int]: ``20`` -> ``20``; ``epochs=2`` -> ``{"epochs": 2}``.

    Raises:
        OverrideError: an unknown unit or a count that is not a positive integer.
    """
    unit, sep, count = text.strip().rpartition("=")
    try:
        value: Any = int(count.strip())
    except ValueError:
        value = count.strip()
    try:
        length = Length.parse({unit.strip().lower(): value} if sep else value, "max_length")
    except ConfigError as exc:
        (message,) = exc.errors["max_length"]
        raise OverrideError(f"max_length {text!r}: {message} (N or UNIT=N)") from None
    return length.value if not sep else {length.unit.value: length.value}
