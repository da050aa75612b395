"""Plotly figure builders for the dashboard (pure functions: series in, figure JSON out).

The figures are built server-side with ``plotly.graph_objects`` and shipped to the browser as
JSON, where the local ``plotly.min.js`` draws them with ``Plotly.newPlot`` / ``Plotly.react``.
Series come from ``registry.metrics.read_series``, already downsampled to at most ~2,000 points
per trace (ARCHITECTURE.md "Metrics"), so nothing here scans raw reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

TRAINING = "training"
VALIDATION = "validation"
X_TITLE = "batches (steps_completed)"


def is_charted(group: str, name: str) -> bool:
    """Whether the experiment chart draws the series ``(group, name)``.

    Every validation metric is drawn, and from the training group only losses (``loss`` or any
    name ending in ``loss``, e.g. ``train_loss``): training groups often carry learning rates and
    throughput figures whose scales would flatten the loss curves.
    """
    if group == VALIDATION:
        return True
    return group == TRAINING and name.endswith("loss")


def trace_name(trial_id: int, group: str, name: str) -> str:
    """Legend label of one trace, e.g. ``"T3 validation/validation_accuracy"``."""
    return f"T{trial_id} {group}/{name}"


def isolated_marker_sizes(values: Sequence[float | None], size: int = 5) -> list[int]:
    """Marker sizes that show only points with no drawn neighbour (``size``, else 0).

    With ``connectgaps=False`` a value between two gaps (or alone) has no line segment, so a
    lines-only trace would hide it; a marker on just those points keeps dense curves light.
    """
    out = []
    for i, value in enumerate(values):
        before = i > 0 and values[i - 1] is not None
        after = i + 1 < len(values) and values[i + 1] is not None
        out.append(size if value is not None and not (before or after) else 0)
    return out


def _trace(trial_id: int, series: Mapping[str, Any]) -> go.Scatter:
    group, name = series["group"], series["name"]
    validation = group == VALIDATION
    values = list(series["values"])
    return go.Scatter(
        x=list(series["steps"]),
        # None marks a non-finite (NaN/inf) or non-numeric value: drawn as a gap, never joined.
        y=values,
        name=trace_name(trial_id, group, name),
        legendgroup=f"trial-{trial_id}",
        # Validation points are sparse, so every evaluation gets a marker; dense training
        # curves get one only where a point would otherwise be invisible.
        mode="lines+markers",
        marker={"size": 5 if validation else isolated_marker_sizes(values)},
        line={"width": 1.5, "dash": "solid" if validation else "dot"},
        connectgaps=False,
        meta={"trial_id": trial_id, "group": group, "metric": name},
        # The name comes from fullData, so a metric name is never parsed as a template.
        hovertemplate="%{fullData.name}<br>batch %{x}<br>%{y:.5g}<extra></extra>",
    )


def _axis_buttons() -> list[dict[str, Any]]:
    """Linear / log toggle for the y axis, done by Plotly itself (no page JS needed)."""
    return [
        {
            "type": "buttons",
            "direction": "right",
            "x": 1.0,
            "xanchor": "right",
            "y": 1.12,
            "yanchor": "bottom",
            "showactive": True,
            "buttons": [
                {"label": "linear", "method": "relayout", "args": [{"yaxis.type": "linear"}]},
                {"label": "log", "method": "relayout", "args": [{"yaxis.type": "log"}]},
            ],
        }
    ]


def metrics_figure(
    series_by_trial: Mapping[int, Sequence[Mapping[str, Any]]], *, uirevision: str = "metrics"
) -> dict[str, Any]:
    """Build the experiment chart: training losses and every validation metric against batches.

    Arguments:
        series_by_trial (Mapping[int, Sequence[dict]]): trial id -> that trial's series as returned
            by ``registry.metrics.read_series`` (``{"group", "name", "steps", "values", ...}``;
            ``values`` may hold None for NaN/inf, drawn as gaps).
        uirevision (str): Plotly's ``layout.uirevision``; while it stays the same, ``Plotly.react``
            keeps the user's zoom, hidden traces and log/linear choice across live updates.

    Returns:
        dict: ``{"data": [trace, ...], "layout": {...}}`` (``Figure.to_plotly_json()``), JSON
        serialisable with ``allow_nan=False``. One trace per (trial, group, metric) that
        ``is_charted``; training and validation share the x axis (``steps_completed``). With no
        series the figure carries a "No metrics reported yet" note instead of traces.
    """
    fig = go.Figure()
    for trial_id in sorted(series_by_trial):
        for series in series_by_trial[trial_id]:
            if is_charted(series["group"], series["name"]):
                fig.add_trace(_trace(trial_id, series))
    fig.update_layout(
        template="plotly_white",
        uirevision=uirevision,
        margin={"l": 60, "r": 20, "t": 40, "b": 50},
        xaxis={"title": {"text": X_TITLE}, "rangemode": "tozero"},
        yaxis={"title": {"text": "value"}, "type": "linear"},
        legend={"orientation": "v", "font": {"size": 11}},
        hovermode="closest",
        updatemenus=_axis_buttons(),
    )
    if not fig.data:
        fig.add_annotation(
            text="No metrics reported yet",
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            font={"size": 16, "color": "#888"},
        )
    return fig.to_plotly_json()
