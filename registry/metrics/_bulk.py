"""Bulk loading of whole series into the metric store (imports, benchmarks, tests).

The same rows ``metrics_report`` writes (raw reports, series aggregates, buckets), built from
numpy arrays in one pass: PostgreSQL's ``COPY`` for the raw rows, multi-row inserts elsewhere.
Not a REST path: it trusts its input and takes no trial lock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
from django.db import connection, transaction

from headway.metric_values import encode_float
from registry.metrics._aggregate import LEVELS, aggregates_from_arrays, merged
from registry.metrics._sql import insert_rows, quote
from registry.metrics._store import BUCKET_COLUMNS, BUCKET_TABLE, SERIES_COLUMNS, SERIES_TABLE
from registry.models import MetricReport

_RAW_COLUMNS = ("trial_id", "group", "steps_completed", "run_id", "epoch", "reported_at", "metrics")


def bulk_load(
    trial_id: int,
    group: str,
    steps: np.ndarray,
    series: Mapping[str, np.ndarray],
    *,
    started_at: datetime,
    seconds_per_step: float = 0.01,
    steps_per_epoch: int | None = None,
    run_id: int = 1,
) -> int:
    """Store one report per step holding every series' value at that step; return points stored.

    Arguments:
        steps: int64, strictly increasing ``steps_completed``.
        series: ``{name: float64 array}`` aligned with ``steps``; NaN/inf are stored as the
            strings ``"NaN"``/``"Infinity"`` and charted as gaps.
        started_at: ``reported_at`` of step 0; each step adds ``seconds_per_step``.
        steps_per_epoch: sets ``epoch = step / steps_per_epoch`` when given.

    Raises:
        ValueError: when the group already holds reports (bulk loads only fill empty groups)
            or an array's length differs from ``steps``.
    """
    if MetricReport.objects.filter(trial_id=trial_id, group=group).exists():
        raise ValueError(
            f"trial {trial_id} already has {group!r} reports; bulk_load fills empty groups"
        )
    for name, values in series.items():
        if len(values) != len(steps):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(steps)} steps")
    names = list(series)
    columns = [series[name].tolist() for name in names]
    step_list = steps.tolist()
    with transaction.atomic():
        _copy_raw(
            trial_id,
            group,
            step_list,
            names,
            columns,
            started_at,
            seconds_per_step,
            steps_per_epoch,
            run_id,
        )
        for name in names:
            values = np.where(np.isfinite(series[name]), series[name], np.nan)
            buckets = aggregates_from_arrays(steps, values)
            root = merged(agg for (level, _), agg in sorted(buckets.items()) if level == LEVELS - 1)
            ((series_id,),) = insert_rows(
                SERIES_TABLE,
                SERIES_COLUMNS,
                [(trial_id, group, name, *root)],
                returning=("id",),
            )
            insert_rows(
                BUCKET_TABLE,
                BUCKET_COLUMNS,
                [(series_id, level, bucket, *agg) for (level, bucket), agg in buckets.items()],
            )
    return len(step_list) * len(names)


def _json_number(value: float) -> str:
    """A float as stored JSON text (``repr`` is JSON's float syntax; non-finite as names)."""
    return repr(value) if math.isfinite(value) else json.dumps(encode_float(value))


def _copy_raw(
    trial_id: int,
    group: str,
    steps: list[int],
    names: list[str],
    columns: list[list[float]],
    started_at: datetime,
    seconds_per_step: float,
    steps_per_epoch: int | None,
    run_id: int,
) -> None:
    # Text built in bulk (numpy for timestamps, repr for numbers): per-row json.dumps and
    # datetime adaptation were three quarters of a million-row load.
    keys = [json.dumps(name) for name in names]
    encoded = [[_json_number(v) for v in col] for col in columns]
    documents = [
        "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, vals, strict=True)) + "}"
        for vals in zip(*encoded, strict=True)
    ]
    base = np.datetime64(started_at.astimezone(UTC).replace(tzinfo=None), "us")
    offsets = (np.asarray(steps, dtype=np.float64) * seconds_per_step * 1e6).astype(
        "timedelta64[us]"
    )
    stamps = np.char.replace(np.datetime_as_string(base + offsets, unit="us"), "T", " ").tolist()
    postgres = connection.vendor == "postgresql"
    if postgres:
        stamps = [f"{stamp}+00:00" for stamp in stamps]
    rows = (
        (
            trial_id,
            group,
            step,
            run_id,
            step / steps_per_epoch if steps_per_epoch else None,
            at,
            doc,
        )
        for step, at, doc in zip(steps, stamps, documents, strict=True)
    )
    table = quote(MetricReport._meta.db_table)
    cols = ", ".join(quote(c) for c in _RAW_COLUMNS)
    with connection.cursor() as cursor:
        if postgres:
            with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        sql = f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(_RAW_COLUMNS))})"
        cursor.executemany(sql, list(rows))
