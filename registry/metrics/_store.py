"""Keeping ``MetricSeries`` and ``MetricBucket`` in step with the raw reports of a trial.

Two paths, chosen per series by ``metrics_report``:

- ``append``: points never stored before (training going forward, the common case, or a
  metric added to a stored step). Their per-bucket aggregates are merged into the stored ones
  in SQL on conflict: one statement for the series, one for the buckets, no reads.
- ``rebuild``: the batch changes or removes stored points (a value reported again at a step,
  a restarted run re-reporting after its checkpoint: ``registry.metrics._merge``). Level-0
  buckets holding such a step are recomputed from the raw rows (at most ``BASE_WIDTH`` rows
  each), each level above from its children, and each series from its top-level buckets: cost
  grows with the batch, not with the series.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Q

from headway.metric_values import chartable
from registry.metrics._aggregate import (
    AGG_FIELDS,
    BASE_WIDTH,
    FANOUT,
    LEVELS,
    Agg,
    many_bucket_aggregates,
    merge_all,
    merged,
    point,
)
from registry.metrics._sql import (
    insert_clauses,
    insert_rows,
    quote,
    recordset,
    recordset_payload,
)
from registry.models import MetricBucket, MetricReport, MetricSeries
from registry.sql_cursor import execute_pipelined, prepared_cursor

SeriesKey = tuple[str, str]  # (group, name)
_AGG_TYPES = {
    "count": "bigint",
    "first_step": "bigint",
    "last_step": "bigint",
    "min_step": "bigint",
    "max_step": "bigint",
    "gap_step": "bigint",
}
AGG_COLUMNS = [(f, _AGG_TYPES.get(f, "double precision")) for f in AGG_FIELDS]
SERIES_COLUMNS = [("trial_id", "bigint"), ("group", "varchar"), ("name", "varchar"), *AGG_COLUMNS]
BUCKET_COLUMNS = [
    ("series_id", "bigint"),
    ("level", "smallint"),
    ("bucket", "bigint"),
    *AGG_COLUMNS,
]
SERIES_TABLE = MetricSeries._meta.db_table
BUCKET_TABLE = MetricBucket._meta.db_table


@functools.cache
def _merge_updates(table: str) -> tuple[str, ...]:
    """``SET`` clauses merging ``EXCLUDED``'s aggregate into the stored one (disjoint points)."""
    return _merge_updates_sql(connection.vendor, table)


@functools.cache
def _merge_updates_sql(vendor: str, table: str) -> tuple[str, ...]:
    t, x = quote(table), "EXCLUDED"

    def col(name: str) -> str:
        return quote(name)

    def pick(cond: str, field: str) -> str:
        return f"{col(field)} = CASE WHEN {cond} THEN {x}.{col(field)} ELSE {t}.{col(field)} END"

    first = f"{x}.{col('first_step')} < {t}.{col('first_step')}"
    last = f"{x}.{col('last_step')} > {t}.{col('last_step')}"
    low = (
        f"{t}.{col('min_value')} IS NULL OR {x}.{col('min_value')} < {t}.{col('min_value')}"
        f" OR ({x}.{col('min_value')} = {t}.{col('min_value')}"
        f" AND {x}.{col('min_step')} < {t}.{col('min_step')})"
    )
    high = (
        f"{t}.{col('max_value')} IS NULL OR {x}.{col('max_value')} > {t}.{col('max_value')}"
        f" OR ({x}.{col('max_value')} = {t}.{col('max_value')}"
        f" AND {x}.{col('max_step')} < {t}.{col('max_step')})"
    )
    gap = f"{t}.{col('gap_step')} IS NULL OR {x}.{col('gap_step')} < {t}.{col('gap_step')}"
    return (
        f"{col('count')} = {t}.{col('count')} + {x}.{col('count')}",
        pick(first, "first_step"),
        pick(first, "first_value"),
        pick(last, "last_step"),
        pick(last, "last_value"),
        pick(low, "min_step"),
        pick(low, "min_value"),
        pick(high, "max_step"),
        pick(high, "max_value"),
        pick(gap, "gap_step"),
    )


class AppendPlan(NamedTuple):
    """A batch's never-stored points as rows for ``append`` (``plan_append``).

    Attributes:
        buckets: ``{(group, name): {(level, bucket): aggregate}}`` of the batch's points alone.
        roots: ``{(group, name): aggregate}`` of the batch's points alone (each series'
            contribution, which ``append`` merges into the stored aggregate).
    """

    buckets: dict[SeriesKey, dict[tuple[int, int], Agg]]
    roots: dict[SeriesKey, Agg]


def plan_append(points: Mapping[SeriesKey, list[tuple[int, float | None]]]) -> AppendPlan:
    """The bucket and series aggregates of never-stored ``points`` (computed once, in numpy).

    Arguments:
        points: ``{(group, name): [(step, value), ...]}``, steps distinct within a series and
            absent from the store; value None is a gap. Empty lists are skipped.
    """
    per_series = many_bucket_aggregates({key: pts for key, pts in points.items() if pts})
    roots = {
        key: merged(buckets[k] for k in buckets if k[0] == LEVELS - 1)
        for key, buckets in per_series.items()
    }
    return AppendPlan(per_series, roots)


def append(
    trial_id: int,
    plan: AppendPlan,
    *,
    with_statements: Sequence[tuple[str, list[Any]]] = (),
    commit: bool = False,
) -> dict[SeriesKey, Agg]:
    """Merge a plan's never-stored points into their series and buckets; return the series' new
    aggregates (stored and batch merged, as the database holds them now).

    Arguments:
        plan: ``plan_append`` of the points.
        with_statements: PostgreSQL only: ``(data-modifying SQL, its parameters)`` run in the
            same statement (CTEs), e.g. the batch's raw rows and the trial's update: one round
            trip for all of them. They must not touch the series or bucket tables.
        commit: with ``with_statements``, in a transaction the caller opened while Django is in
            autocommit mode (``lock_trial(begin=True)``): its ``COMMIT`` travels with the
            statement (``execute_pipelined``). On an error the transaction is left failed.
    """
    series_rows = [(trial_id, group, name, *root) for (group, name), root in plan.roots.items()]
    if with_statements:
        return _append_in_one_statement(plan.buckets, series_rows, with_statements, commit)
    returned = insert_rows(
        SERIES_TABLE,
        SERIES_COLUMNS,
        series_rows,
        conflict=("trial_id", "group", "name"),
        updates=_merge_updates(SERIES_TABLE),
        returning=("id", "group", "name", *AGG_FIELDS),
    )
    ids: dict[SeriesKey, int] = {}
    out: dict[SeriesKey, Agg] = {}
    for series_id, group, name, *agg in returned:
        ids[(group, name)] = series_id
        out[(group, name)] = tuple(agg)
    bucket_rows = [
        (ids[key], level, bucket, *agg)
        for key, buckets in plan.buckets.items()
        for (level, bucket), agg in buckets.items()
    ]
    insert_rows(
        BUCKET_TABLE,
        BUCKET_COLUMNS,
        bucket_rows,
        conflict=("series_id", "level", "bucket"),
        updates=_merge_updates(BUCKET_TABLE),
    )
    return out


_BUCKET_SOURCE = [("sgroup", "varchar"), ("sname", "varchar"), *BUCKET_COLUMNS[1:]]


@functools.cache
def _series_and_buckets_ctes() -> str:
    """``s AS (series upsert RETURNING ..), b AS (bucket upsert from s)``: two parameters, the
    series' and the buckets' ``recordset_payload`` (built once: quoting every name of these
    statements was a tenth of a one-point report's server time)."""
    s_head, s_tail = insert_clauses(
        SERIES_TABLE,
        [c for c, _ in SERIES_COLUMNS],
        conflict=("trial_id", "group", "name"),
        updates=_merge_updates(SERIES_TABLE),
        returning=("id", "group", "name", *AGG_FIELDS),
    )
    b_head, b_tail = insert_clauses(
        BUCKET_TABLE,
        [c for c, _ in BUCKET_COLUMNS],
        conflict=("series_id", "level", "bucket"),
        updates=_merge_updates(BUCKET_TABLE),
    )
    picked = ", ".join(f"r.{quote(c)}" for c, _ in BUCKET_COLUMNS[1:])
    bucket_source = recordset(_BUCKET_SOURCE).replace("SELECT *", f"SELECT s.id, {picked}")
    bucket_source += f" JOIN s ON s.{quote('group')} = r.sgroup AND s.name = r.sname"
    return f"s AS ({s_head}{recordset(SERIES_COLUMNS)}{s_tail}), b AS ({b_head}{bucket_source}{b_tail})"


def _append_in_one_statement(
    per_series: Mapping[SeriesKey, Mapping[tuple[int, int], Agg]],
    series_rows: list[tuple],
    with_statements: Sequence[tuple[str, list[Any]]],
    commit: bool,
) -> dict[SeriesKey, Agg]:
    """``append``'s two upserts and ``with_statements`` as one PostgreSQL statement (and the
    transaction's ``COMMIT`` in the same round trip when ``commit``).

    The buckets find their series' ids by joining the series upsert's ``RETURNING`` rows (a
    data-modifying CTE), so nothing waits for a first answer; every part sees the same
    snapshot, and they touch different tables.
    """
    others = [f"o{i} AS ({sql})" for i, (sql, _) in enumerate(with_statements)]
    params: list[Any] = [p for _, ps in with_statements for p in ps]
    if series_rows:
        bucket_rows = [
            (group, name, level, bucket, *agg)
            for (group, name), buckets in per_series.items()
            for (level, bucket), agg in buckets.items()
        ]
        sql = f"WITH {_series_and_buckets_ctes()}, {', '.join(others)} SELECT * FROM s"
        params = [
            recordset_payload(SERIES_COLUMNS, series_rows),
            recordset_payload(_BUCKET_SOURCE, bucket_rows),
            *params,
        ]
    else:  # reports without metrics: only the other statements
        sql = f"WITH {', '.join(others)} SELECT NULL, NULL, NULL WHERE false"
    with prepared_cursor() as cursor:
        execute_pipelined(cursor, sql, params, commit=commit)
        returned = cursor.fetchall()
    return {(group, name): tuple(agg) for _id, group, name, *agg in returned}


def _runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted integers as maximal ``(first, last)`` runs of consecutive values."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def _raw_points(
    trial_id: int, group: str, buckets: Iterable[int]
) -> dict[str, dict[int, list[tuple[int, float | None]]]]:
    """``{name: {level-0 bucket: [(step, value)]}}`` of ``group`` read from the raw reports."""
    # The whole index prefix in every OR term: each is a range seek (registry.metrics._read).
    where = Q()
    for lo, hi in _runs(buckets):
        where |= Q(
            trial_id=trial_id,
            group=group,
            steps_completed__gte=lo * BASE_WIDTH,
            steps_completed__lt=(hi + 1) * BASE_WIDTH,
        )
    if not where:  # no bucket: nothing to read (an empty Q would match every row)
        return {}
    rows = MetricReport.objects.filter(where).values_list("steps_completed", "metrics")
    out: dict[str, dict[int, list[tuple[int, float | None]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for step, metrics in rows.iterator(chunk_size=2000):
        for name, value in metrics.items():
            out[name][step // BASE_WIDTH].append((step, chartable(value)))
    return out


def rebuild(
    trial_id: int, group: str, steps: Iterable[int], names: Collection[str] | None = None
) -> dict[SeriesKey, Agg | None]:
    """Recompute the series of ``group`` (those in ``names``, else all) where reports at
    ``steps`` were stored or replaced.

    Returns ``{(group, name): aggregate}`` for those series, None for a series left with no
    point (its row is deleted). Cost: the raw rows of the level-0 buckets holding ``steps``,
    then ``FANOUT`` child rows per changed bucket per level, then the top-level rows.
    """
    changed = {step // BASE_WIDTH for step in steps}
    raw = _raw_points(trial_id, group, changed)
    series = MetricSeries.objects.filter(trial_id=trial_id, group=group)
    if names is not None:
        raw = {name: by_bucket for name, by_bucket in raw.items() if name in names}
        series = series.filter(name__in=names)
    existing = dict(series.values_list("name", "id"))
    new_names = [name for name in raw if name not in existing]
    if new_names:
        placeholder = (0, 0, None, 0, None, None, None, None, None, None)
        created = insert_rows(
            SERIES_TABLE,
            SERIES_COLUMNS,
            [(trial_id, group, name, *placeholder) for name in new_names],
            returning=("id", "name"),
        )
        existing.update({name: series_id for series_id, name in created})
    series_ids = list(existing.values())
    by_name = {series_id: name for name, series_id in existing.items()}
    level_rows: list[tuple] = []
    for name, series_id in existing.items():
        for bucket, pts in raw.get(name, {}).items():
            level_rows.append((series_id, 0, bucket, *merged(point(s, v) for s, v in pts)))
    _replace_level(series_ids, 0, changed, level_rows)
    for level in range(1, LEVELS):
        parents = {bucket // FANOUT for bucket in changed}
        children = _read_buckets(series_ids, level - 1, parents, FANOUT)
        grouped: dict[tuple[int, int], list[Agg]] = defaultdict(list)
        for series_id, bucket, agg in children:
            grouped[(series_id, bucket // FANOUT)].append(agg)
        level_rows = [
            (series_id, level, bucket, *merged(aggs))
            for (series_id, bucket), aggs in grouped.items()
        ]
        _replace_level(series_ids, level, parents, level_rows)
        changed = parents
    tops: dict[int, list[Agg]] = defaultdict(list)
    top_rows = MetricBucket.objects.filter(series_id__in=series_ids, level=LEVELS - 1)
    for series_id, *agg in top_rows.values_list("series_id", *AGG_FIELDS):
        tops[series_id].append(tuple(agg))
    out: dict[SeriesKey, Agg | None] = {}
    empty: list[int] = []
    for series_id in series_ids:
        root = merge_all(sorted(tops.get(series_id, []), key=lambda a: a[1]))
        out[(group, by_name[series_id])] = root
        if root is None:
            empty.append(series_id)
        else:
            fields = dict(zip(AGG_FIELDS, root, strict=True))
            MetricSeries.objects.filter(id=series_id).update(**fields)
    MetricSeries.objects.filter(id__in=empty).delete()
    return out


def _read_buckets(
    series_ids: list[int], level: int, parents: Iterable[int], fanout: int
) -> list[tuple[int, int, Agg]]:
    """``(series_id, bucket, aggregate)`` of the children at ``level`` of the ``parents``."""
    where = Q()
    for lo, hi in _runs(parents):
        where |= Q(
            series_id__in=series_ids,
            level=level,
            bucket__gte=lo * fanout,
            bucket__lt=(hi + 1) * fanout,
        )
    if not where:
        return []
    rows = MetricBucket.objects.filter(where)
    return [
        (series_id, bucket, tuple(agg))
        for series_id, bucket, *agg in rows.values_list("series_id", "bucket", *AGG_FIELDS)
    ]


def _replace_level(
    series_ids: list[int], level: int, buckets: Iterable[int], rows: list[tuple]
) -> None:
    """Delete the ``buckets`` of ``level`` of the series, then insert ``rows`` in their place."""
    where = Q()
    for lo, hi in _runs(buckets):
        where |= Q(series_id__in=series_ids, level=level, bucket__gte=lo, bucket__lte=hi)
    if where:  # an empty Q would match (and delete) every bucket
        MetricBucket.objects.filter(where).delete()
    insert_rows(BUCKET_TABLE, BUCKET_COLUMNS, rows)


def rebuild_trial(trial_id: int) -> None:
    """Rebuild every series and bucket of a trial from its raw reports (backfill, repair).

    Reads each group's reports once; O(reports) time and memory.
    """
    groups = MetricReport.objects.filter(trial_id=trial_id).values_list("group", flat=True)
    for group in sorted(set(groups)):
        steps = MetricReport.objects.filter(trial_id=trial_id, group=group).values_list(
            "steps_completed", flat=True
        )
        rebuild(trial_id, group, steps.iterator(chunk_size=5000))
