"""The metric tables carry no index that another one's leading columns already provide: each
index costs one more insert (and on PostgreSQL one more WAL record) per stored row."""

from __future__ import annotations

import pytest
from django.db import connection

from registry.models import MetricBucket, MetricReport, MetricSeries

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [MetricReport, MetricSeries, MetricBucket])
def test_no_metric_index_is_a_prefix_of_another(model):
    table = model._meta.db_table
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    indexes = {
        name: tuple(info["columns"])
        for name, info in constraints.items()
        if info["index"] or info["unique"] or info["primary_key"]
    }
    assert indexes, f"{table} has no index at all"
    redundant = [
        (name, columns, other)
        for name, columns in indexes.items()
        for other_name, other in indexes.items()
        if other_name != name and len(other) > len(columns) and other[: len(columns)] == columns
    ]
    assert redundant == [], f"{table}: indexes covered by a longer one's prefix: {redundant}"


def _plan(sql: str) -> str:
    """The database's plan for ``sql``, as one string; PostgreSQL told to avoid sequential
    scans (``SET LOCAL``, this test's transaction only), so an empty table's plan still says
    whether an index could serve the lookup."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}")
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return " ".join(str(column) for row in cursor.fetchall() for column in row)


@pytest.mark.parametrize(
    ("model", "column"),
    [(MetricReport, "trial_id"), (MetricSeries, "trial_id"), (MetricBucket, "series_id")],
)
def test_lookups_by_trial_still_use_an_index(model, column):
    """Dropping the foreign-key indexes left each table's trial (or series) column as the first
    column of its unique key, which serves ``WHERE trial_id = ..`` and cascading deletes. Read
    from the query plan: Django's SQLite introspection lists a composite primary key's columns
    out of order."""
    plan = _plan(f"SELECT * FROM {model._meta.db_table} WHERE {column} = 1")
    if connection.vendor == "postgresql":
        assert "Index" in plan and "Seq Scan" not in plan, plan
    else:
        assert "SEARCH" in plan and f"({column}=?)" in plan, plan
