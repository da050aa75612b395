"""The experiment page's trials table, paged and sorted on the server, and its CSV export.

The page never carries more rows than it shows (``PAGE_SIZE``): a 1,000-trial search renders 50
rows. Everything the browser needs about *every* trial (the legend's search, top N, colours,
the charts' hover, the parallel coordinates) comes as one JSON document
(``dashboard.overview.trials_data``), fetched by the page, never embedded in it.

Queries per call are bounded whatever the number of trials: the page's rows with their runs and
checkpoints (``dashboard.selectors.experiment_trials`` on the page only), one count, and for the
CSV one streamed read of every trial's summary fields.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, OrderBy, QuerySet
from django.http import QueryDict

from dashboard import selectors
from dashboard.table_query import Column, TableQuery, apply_filter, parse_columns
from headway.expconf import flatten_hparams
from headway.metric_values import chartable
from registry.models import Experiment, Trial
from registry.search import Target, order_queryset
from registry.search.fields import Kind
from registry.search.paging import SplitIds, rows_in_order, sorted_ids

PAGE_SIZE = 50  # rows a page, as docs/dashboard.md says
# ``?sort=`` keys of the table (a leading ``-`` reverses); "best" puts the best value of the
# searcher metric first whatever the metric's direction.
SORT_KEYS = ("id", "state", "batches", "best")
DEFAULT_SORT = "best"
CSV_FIELDS = ("trial_id", "state", "batches", "restarts", "best_validation", "latest_checkpoint")


def parse_sort(raw: str | None, columns: Sequence[Column] = ()) -> str:
    """``raw`` if it names a sort key or one of the chosen ``columns`` (optionally
    ``-``-prefixed), else ``DEFAULT_SORT``.

    An unknown key falls back instead of answering 400: sort links are built by the page, and
    a stale bookmark should still show the table (as the experiment list does).
    """
    if raw and (raw.lstrip("-") in SORT_KEYS or any(raw.lstrip("-") == c.name for c in columns)):
        return raw
    return DEFAULT_SORT


def read_query(params: QueryDict) -> TableQuery:
    """The table's ``?filter=``, ``?columns=`` and ``?sort=`` (``dashboard.table_query``);
    the filter is checked when applied (``matching_trials``)."""
    columns, column_errors = parse_columns(params.getlist("columns"))
    return TableQuery(
        filter=params.get("filter", ""),
        columns=columns,
        column_errors=column_errors,
        sort=parse_sort(params.get("sort"), columns),
    )


def matching_trials(experiment: Experiment, query: TableQuery) -> QuerySet[Trial]:
    """The experiment's trials that match ``query.filter``, in the order of ``query.sort``.
    A malformed filter is ignored and its message left in ``query.filter_error``."""
    trials, query.filter_error = apply_filter(experiment.trials.all(), query.filter, Target.TRIAL)
    if query.sort.lstrip("-") in SORT_KEYS:
        return trials.order_by(*_ordering(experiment, query.sort))
    # A chosen column: the REST API's ``?order_by=`` (values missing last, ties by id).
    return order_queryset(trials, query.sort)


def _ordering(experiment: Experiment, sort: str) -> list[OrderBy | str]:
    """ORDER BY terms of ``sort``; empty values last either way; ties by id (pages never
    overlap)."""
    key = sort.lstrip("-")
    descending = sort.startswith("-")
    if key == "best":
        # Ascending "best" = best first: ascending values when smaller is better.
        descending = descending == experiment.smaller_is_better
        field = "best_validation"
    else:
        field = {"id": "id", "state": "state", "batches": "steps_completed"}[key]
    expr = F(field)
    term = expr.desc(nulls_last=True) if descending else expr.asc(nulls_last=True)
    return [term, "id"]


@dataclasses.dataclass
class TrialTable:
    """One page of the table: ``rows`` (trials with ``experiment_trials``' display extras and
    ``column_values``, the chosen columns' values), ``page`` (Django's ``Page``), ``query``
    (filter, columns, parsed sort) and ``total`` matching trials."""

    rows: list[Trial]
    page: Page
    query: TableQuery
    total: int

    @property
    def sort(self) -> str:
        """The parsed sort key."""
        return self.query.sort

    def _link(self, key: str) -> dict[str, str]:
        if self.sort == key:
            target, aria = f"-{key}", "ascending"
        elif self.sort == f"-{key}":
            target, aria = key, "descending"
        else:
            target, aria = key, "none"
        return {"sort": target, "aria": aria, "params": self.query.params(sort=target)}

    @property
    def links(self) -> dict[str, dict[str, str]]:
        """Per sort key: ``sort`` (the ``?sort=`` its heading links to: the key, or reversed
        when already sorted by it), ``aria`` (its ``aria-sort``) and ``params`` (the query
        string of that link, filter and columns kept)."""
        return {key: self._link(key) for key in SORT_KEYS}

    @property
    def column_links(self) -> list[dict[str, Any]]:
        """Per chosen column, as ``links``, with ``column`` and ``without`` (the query string
        of the table without that column)."""
        out = []
        for column in self.query.columns:
            rest = [c for c in self.query.columns if c is not column]
            kept = TableQuery(
                filter=self.query.active_filter,
                columns=rest,
                sort=self.sort if self.sort.lstrip("-") != column.name else DEFAULT_SORT,
            )
            out.append({**self._link(column.name), "column": column, "without": kept.params()})
        return out

    def page_params(self, number: int) -> str:
        """The query string of page ``number`` of this table."""
        return self.query.params(page=str(number))


def trial_page(
    experiment: Experiment, user: Any, *, page: str | int | None, query: TableQuery
) -> TrialTable:
    """Page ``page`` (1-based; junk or past the end: the nearest page, as Django's
    ``get_page``) of the trials matching ``query``. Queries: the count, the rows, their runs
    and their checkpoints."""
    trials = matching_trials(experiment, query).prefetch_related("runs")
    ids = sorted_ids(trials)
    paged: Page
    if isinstance(ids, SplitIds):
        # Sorted by a chosen column: the page's ids from the side table's index, then its rows.
        paged = Paginator(ids, PAGE_SIZE).get_page(page)
        objects = rows_in_order(trials, list(paged.object_list))
    else:
        paged = Paginator(trials, PAGE_SIZE).get_page(page)
        objects = list(paged.object_list)
    rows = selectors.experiment_trials(experiment, user, trials=objects)
    for row in rows:
        row.column_values = [column.value(row) for column in query.columns]  # type: ignore[attr-defined]
    return TrialTable(rows=rows, page=paged, query=query, total=paged.paginator.count)


def all_trials_light(experiment: Experiment) -> list[Trial]:
    """Every trial of the experiment with only what the legend, the charts and the update token
    need (no runs, no checkpoints), in id order (1 query)."""
    return list(
        experiment.trials.only(
            "id",
            "experiment_id",
            "state",
            "run_id",
            "restarts",
            "steps_completed",
            "best_validation",
            "latest_checkpoint",
            "summary_metrics",
            "scheduling_message",
            "hparams",
        ).order_by("id")
    )


class _Echo:
    """A file-like object whose ``write`` returns the line (csv writes into it; the response
    streams the lines; Django's documented streaming-CSV pattern)."""

    def write(self, value: str) -> str:
        return value


def csv_rows(experiment: Experiment, query: TableQuery, columns: Sequence[str]) -> Iterator[str]:
    """The table as CSV lines: a header (``CSV_FIELDS``, ``hp.<name>`` per hyperparameter of
    ``columns``, then the name of each chosen metric column of ``query``) and one line per
    trial matching ``query``'s filter (already checked: ``query.filter_error`` is None), in the
    table's sort. Streams (``iterator()``): memory does not grow with the number of trials."""
    writer = csv.writer(_Echo())
    metrics = [c for c in query.columns if c.kind is Kind.METRIC]
    yield writer.writerow(
        [*CSV_FIELDS, *(f"hp.{name}" for name in columns), *(c.name for c in metrics)]
    )
    rows = matching_trials(experiment, query).only(
        "id",
        "state",
        "steps_completed",
        "restarts",
        "best_validation",
        "latest_checkpoint",
        "hparams",
        "summary_metrics",
    )
    for trial in rows.iterator(chunk_size=500):
        flat = dict(flatten_hparams(trial.hparams))
        best = chartable(trial.best_validation)
        yield writer.writerow(
            [
                trial.id,
                trial.state,
                trial.steps_completed,
                trial.restarts,
                "" if best is None else repr(best),
                trial.latest_checkpoint or "",
                *(_cell(flat.get(name)) for name in columns),
                *(_cell(c.value(trial)) for c in metrics),
            ]
        )


def _cell(value: Any) -> str:
    """A hyperparameter as CSV text: numbers exactly (``repr``), absent as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)
