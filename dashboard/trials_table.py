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

from dashboard import selectors
from headway.expconf import flatten_hparams
from headway.metric_values import chartable
from registry.models import Experiment, Trial

PAGE_SIZE = 50  # rows a page, as docs/dashboard.md says
# ``?sort=`` keys of the table (a leading ``-`` reverses); "best" puts the best value of the
# searcher metric first whatever the metric's direction.
SORT_KEYS = ("id", "state", "batches", "best")
DEFAULT_SORT = "best"
CSV_FIELDS = ("trial_id", "state", "batches", "restarts", "best_validation", "latest_checkpoint")


def parse_sort(raw: str | None) -> str:
    """``raw`` if it names a sort key (optionally ``-``-prefixed), else ``DEFAULT_SORT``.

    An unknown key falls back instead of answering 400: sort links are built by the page, and
    a stale bookmark should still show the table (as the experiment list does).
    """
    if raw and raw.lstrip("-") in SORT_KEYS:
        return raw
    return DEFAULT_SORT


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


def sorted_trials(experiment: Experiment, sort: str) -> QuerySet[Trial]:
    """The experiment's trials in the table's order (``sort`` already parsed)."""
    return experiment.trials.order_by(*_ordering(experiment, sort))


@dataclasses.dataclass
class TrialTable:
    """One page of the table: ``rows`` (trials with ``experiment_trials``' display extras),
    ``page`` (Django's ``Page``), ``sort`` (the parsed key) and ``total`` trials."""

    rows: list[Trial]
    page: Page
    sort: str
    total: int

    @property
    def links(self) -> dict[str, dict[str, str]]:
        """Per sort key: ``sort`` (the ``?sort=`` its heading links to: the key, or reversed
        when already sorted by it) and ``aria`` (its ``aria-sort``)."""
        out = {}
        for key in SORT_KEYS:
            if self.sort == key:
                out[key] = {"sort": f"-{key}", "aria": "ascending"}
            elif self.sort == f"-{key}":
                out[key] = {"sort": key, "aria": "descending"}
            else:
                out[key] = {"sort": key, "aria": "none"}
        return out


def trial_page(
    experiment: Experiment, user: Any, *, page: str | int | None, sort: str | None
) -> TrialTable:
    """Page ``page`` (1-based; junk or past the end: the nearest page, as Django's
    ``get_page``) of the trials sorted by ``sort``. Queries: the count, the rows, their runs
    and their checkpoints."""
    key = parse_sort(sort)
    query = sorted_trials(experiment, key).prefetch_related("runs")
    paged = Paginator(query, PAGE_SIZE).get_page(page)
    rows = selectors.experiment_trials(experiment, user, trials=list(paged.object_list))
    return TrialTable(rows=rows, page=paged, sort=key, total=paged.paginator.count)


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


def csv_rows(experiment: Experiment, sort: str | None, columns: Sequence[str]) -> Iterator[str]:
    """The table as CSV lines: a header (``CSV_FIELDS`` then ``hp.<name>`` per hyperparameter
    of ``columns``) and one line per trial, every trial of the experiment in the table's
    ``sort``. Streams (``iterator()``): memory does not grow with the number of trials."""
    writer = csv.writer(_Echo())
    yield writer.writerow([*CSV_FIELDS, *(f"hp.{name}" for name in columns)])
    query = sorted_trials(experiment, parse_sort(sort)).only(
        "id",
        "state",
        "steps_completed",
        "restarts",
        "best_validation",
        "latest_checkpoint",
        "hparams",
    )
    for trial in query.iterator(chunk_size=500):
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
            ]
        )


def _cell(value: Any) -> str:
    """A hyperparameter as CSV text: numbers exactly (``repr``), absent as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)
