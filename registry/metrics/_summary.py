"""A trial's ``summary_metrics`` in bounded pieces: the trial answer embeds at most
``SUMMARY_SERIES_IN_TRIAL`` series, and ``GET trials/{id}/summary-metrics/`` pages them all.

A trial may hold up to ``HEADWAY_MAX_METRIC_SERIES_PER_TRIAL`` (10,000) series; embedding every
aggregate made one trial's ``GET`` 0.6 MB (and an experiment's trial list that times its trials).
"""

from __future__ import annotations

from typing import Any

SUMMARY_SERIES_IN_TRIAL = 100
"""Series a trial answer embeds in ``summary_metrics`` (the searcher metric's first)."""


def summary_series(summary: Any) -> list[tuple[str, str, Any]]:
    """Every ``(group, name, aggregate)`` of a ``Trial.summary_metrics`` mapping, sorted by group
    then name (the order the summary route pages in); anything that is not a mapping is empty."""
    if not isinstance(summary, dict):
        return []
    return [
        (group, name, entry)
        for group, by_name in sorted(summary.items())
        if isinstance(by_name, dict)
        for name, entry in sorted(by_name.items())
    ]


def summary_count(summary: Any) -> int:
    """How many series ``summary`` holds."""
    if not isinstance(summary, dict):
        return 0
    return sum(len(by_name) for by_name in summary.values() if isinstance(by_name, dict))


def bounded_summary(
    summary: Any, searcher_metric: str | None, limit: int = SUMMARY_SERIES_IN_TRIAL
) -> dict[str, dict[str, Any]]:
    """``summary`` (``{group: {name: aggregate}}``) with at most ``limit`` series: the
    validation series ``searcher_metric`` first when there is one, then the others in
    ``summary_series`` order. The same mapping when it holds ``limit`` or fewer."""
    if summary_count(summary) <= limit:
        return summary if isinstance(summary, dict) else {}
    out: dict[str, dict[str, Any]] = {}
    kept = 0
    first = summary.get("validation", {}) if searcher_metric else {}
    if searcher_metric is not None and isinstance(first, dict) and searcher_metric in first:
        out["validation"] = {searcher_metric: first[searcher_metric]}
        kept = 1
    for group, name, entry in summary_series(summary):
        if kept >= limit:
            break
        if name in out.get(group, {}):
            continue
        out.setdefault(group, {})[name] = entry
        kept += 1
    return out
