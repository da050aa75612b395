"""``system_metrics``: the trial's background sampler of CPU, GPU, memory and throughput.

A Headway section (Determined's nearest is its profiler, on or off with ``profiling.enabled``);
the sampler itself is ``headway.core._system_metrics``. Kept apart from ``_experiment.py`` so that
module stays the list of fields.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, field_validator

from headway.expconf._base import StrictModel

DEFAULT_INTERVAL_S = 10.0
MIN_INTERVAL_S = 0.1  # below this the samples cost more than they tell


class SystemMetricsConfig(StrictModel):
    """``system_metrics: {enabled: bool, interval_s: float}``.

    ``enabled`` (default true): the chief samples system metrics while the trial runs and reports
    them as the metric group ``system``. ``interval_s`` (default 10): seconds between samples,
    a finite number >= 0.1. The environment variable ``HEADWAY_SYSTEM_METRICS=0`` turns the
    sampler off whatever the config says.
    """

    enabled: bool = True
    interval_s: Annotated[float, Field(ge=MIN_INTERVAL_S)] = DEFAULT_INTERVAL_S

    @field_validator("interval_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value
