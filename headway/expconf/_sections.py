"""Smaller sections of Determined's experiment config: ``profiling``, the fields Headway refuses
with a reason, ``0`` periods and the two forms of an ASHA search's length.

Kept apart from ``_experiment.py`` so that module stays the list of fields; each helper here is
one rule of Determined 0.38's schema (``schemas/expconf/v0/*.json`` in determined-ai/determined).
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from headway.expconf._base import StrictModel, field_error, reject_unsupported

UNSUPPORTED_TOP_LEVEL: dict[str, str] = {
    "bind_mounts": (
        "Headway runs a trial as a process on the worker host, not in a container, so there "
        "is nothing to mount: read the host path directly (it must exist on every worker host)"
    ),
}
"""Top-level Determined fields refused with the reason (named in the error)."""

UNSUPPORTED_PROFILING: dict[str, str] = {
    key: (
        "Determined 0.38 ignores it as well (profiling is on or off for the whole run); for "
        "torch.profiler traces of chosen batches use context.set_profiler(...)"
    )
    for key in ("begin_on_batch", "end_after_batch", "sync_timings")
}


class ProfilingConfig(StrictModel):
    """``profiling``: ``enabled: true`` makes a ``module:Class`` trial report system metrics
    (``cpu_util_simple``, ``memory_free``) in the metric group ``profiling`` while it trains, as
    Determined's harness passes ``profiling.enabled`` to ``Trainer.fit(profiling_enabled=)``.
    A script calls ``fit(profiling_enabled=True)`` itself. ``begin_on_batch``,
    ``end_after_batch`` and ``sync_timings`` are refused (``UNSUPPORTED_PROFILING``).
    """

    enabled: bool = False

    @model_validator(mode="before")
    @classmethod
    def _refuse(cls, data: Any) -> Any:
        return reject_unsupported(data, UNSUPPORTED_PROFILING)


def zero_length_is_never(value: Any) -> Any:
    """``min_validation_period`` / ``min_checkpoint_period``: a length of 0 (``{batches: 0}``,
    ``0``, ``{unit: batches, value: 0}``) means "never", as in Determined, whose default is
    ``{batches: 0}``; it becomes None (Headway's "never"). Anything else is left to ``Length``."""
    if value == 0 and not isinstance(value, bool):
        return None
    if isinstance(value, dict):
        if set(value) == {"unit", "value"} and value["value"] == 0:
            return None
        if len(value) == 1:
            (amount,) = value.values()
            if amount == 0 and not isinstance(amount, bool):
                return None
    return value


ASHA_FORMS = (
    "either time_metric and max_time (Determined 0.38: trials report the time metric in their "
    "validation metrics and ASHA stops the losing ones) or max_length (the searcher gives each "
    "trial operations of rung lengths through core_context.searcher.operations())"
)


def check_asha_length(searcher: Any) -> None:
    """An ASHA searcher needs exactly one of its two length forms (``ASHA_FORMS``).

    Raises:
        PydanticCustomError: naming ``time_metric``, ``max_time`` or ``max_length``.
    """
    timed = searcher.time_metric is not None or searcher.max_time is not None
    if searcher.time_metric is None and searcher.max_time is not None:
        raise field_error("time_metric", "required with max_time (the metric max_time counts)")
    if searcher.max_time is None and searcher.time_metric is not None:
        raise field_error("max_time", "required with time_metric (the top rung's time)")
    if timed and searcher.max_length is not None:
        raise field_error("max_length", f"give {ASHA_FORMS}, not both")
    if not timed and searcher.max_length is None:
        raise field_error("max_time", f"{searcher.name} needs {ASHA_FORMS}")
