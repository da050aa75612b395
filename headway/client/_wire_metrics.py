"""Wire models of reported metrics: the batch a trial sends and the series charts read back
(``trials/{id}/metrics/``, ``experiments/{id}/metrics/``), re-exported by
``headway.client._wire``."""

from __future__ import annotations

from headway.client._wire import WireModel


class MetricsAccepted(WireModel):
    """``POST trials/{id}/metrics/``: how many reports the batch held (all stored, idempotently
    on ``(trial, group, steps_completed)``)."""

    accepted: int


class MetricSeries(WireModel):
    """One ``(group, name)`` series of a trial, as charts read it (docs/rest-api.md "Metrics").

    The four lists are aligned: one entry per returned point.

    Attributes:
        group (str), name (str): the series.
        count (int): stored points in the window (more than ``len(steps)`` when downsampled).
        downsampled (bool): whether the points are a downsampling of the window's.
        last_step (int): the series' last stored step (a live poll's next ``after_step``).
        steps (list[int]): ``steps_completed`` of each point, ascending.
        values (list[float | None]): each point's value; None for a gap (NaN, inf, not a number).
        min, max (list[float | None] | None): with ``band=true`` and downsampled only, the
            smallest and largest finite value of each point's step range; absent otherwise.
        epochs (list[float | None] | None): with ``x_axis=epochs`` only, the reported epoch.
        elapsed_seconds (list[float | None] | None): with ``x_axis=time`` only, seconds since
            the trial's first run started.
    """

    group: str
    name: str
    count: int
    downsampled: bool
    last_step: int
    steps: list[int]
    values: list[float | None]
    min: list[float | None] | None = None
    max: list[float | None] | None = None
    epochs: list[float | None] | None = None
    elapsed_seconds: list[float | None] | None = None


class TrialMetrics(WireModel):
    """``GET trials/{id}/metrics/``: the trial's series matching the query, by group, name."""

    trial_id: int
    series: list[MetricSeries]


class ExperimentMetricSeries(MetricSeries):
    """A ``MetricSeries`` of one trial of an experiment (``trial_id``)."""

    trial_id: int


class ExperimentMetrics(WireModel):
    """``GET experiments/{id}/metrics/``: one series per trial and metric, by trial, group,
    name (the overview charts)."""

    experiment_id: int
    series: list[ExperimentMetricSeries]
