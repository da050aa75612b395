"""Metric storage: validated batch ingestion, per-series aggregates, chart-ready reads, export.

Reports are upserted on ``(trial, group, steps_completed)`` so retries never duplicate; a
report of a stored step merges per metric with the same run's stored report (the later value
wins), and a resumed or restarted run supersedes what a failed run reported after its last
checkpoint.
Every ``(trial, group, name)`` series keeps an aggregate and multi-resolution buckets, updated
in the report's transaction, so reads cost O(points returned) (docs/internals.md
"Metric store"); ``Trial.summary_metrics`` and ``best_validation`` come from the same
aggregates, so list pages never scan raw reports.
"""

from registry.metrics._aggregate import BASE_WIDTH, FANOUT, LEVELS, level_width
from registry.metrics._axes import XAxis
from registry.metrics._export import stream_rows
from registry.metrics._ingest import metrics_report
from registry.metrics._parse import (
    MAX_REPORTS_PER_BATCH,
    ReportIn,
    parse_reports,
    report_batch_json_schema,
)
from registry.metrics._read import Window, read_experiment_series, read_series
from registry.metrics._store import rebuild_trial
from registry.metrics._summary import (
    SUMMARY_SERIES_IN_TRIAL,
    bounded_summary,
    summary_count,
    summary_series,
)

__all__ = [
    "BASE_WIDTH",
    "FANOUT",
    "LEVELS",
    "MAX_REPORTS_PER_BATCH",
    "SUMMARY_SERIES_IN_TRIAL",
    "ReportIn",
    "Window",
    "XAxis",
    "bounded_summary",
    "level_width",
    "metrics_report",
    "parse_reports",
    "read_experiment_series",
    "read_series",
    "rebuild_trial",
    "report_batch_json_schema",
    "stream_rows",
    "summary_count",
    "summary_series",
]
