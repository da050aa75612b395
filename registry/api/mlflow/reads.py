"""Reads of the MLflow-compatible API: run and experiment searches, metric histories.

Searches load the runs of the named experiments once and filter and sort them in Python
(``registry.api.mlflow.filters``): a run's latest metric values come from
``Trial.summary_metrics``, so no metric row is read; histories read the raw reports of one
series in step order through the reports' unique index.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from registry.api.mlflow import filters
from registry.api.mlflow.entities import (
    DELETION_STATES,
    experiment_json,
    json_number,
    metric_number,
    millis,
    run_facts,
    run_json,
    series_of_key,
)
from registry.api.mlflow.errors import invalid
from registry.api.mlflow.store import experiment as experiment_of
from registry.authz import scoped
from registry.models import Experiment, MetricReport, RunState, Trial, TrialRun
from registry.models.experiment import blob_fields

# MLflow's limits (mlflow/utils/search_utils.py, mlflow/store/tracking/__init__.py).
DEFAULT_MAX_RESULTS = 1000
MAX_RESULTS = 50_000
HISTORY_PAGE = 25_000
RUN_TIE_BREAKS = [("attributes", "start_time", True, True), ("attributes", "run_id", True, False)]
EXPERIMENT_TIE_BREAKS = [("attributes", "experiment_id", True, True)]
VIEW_TYPES = {"ACTIVE_ONLY", "DELETED_ONLY", "ALL", "1", "2", "3"}


def _max_results(value: Any, default: int = DEFAULT_MAX_RESULTS, top: int = MAX_RESULTS) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(f"Invalid max_results {value!r}: an integer.") from None
    if not 1 <= number <= top:
        raise invalid(f"Invalid value {number} for parameter 'max_results': 1 to {top}.")
    return number


def _stage_filter(view_type: Any) -> set[str]:
    """The lifecycle stages a ``run_view_type`` / ``view_type`` shows (names or proto numbers)."""
    text = str(view_type or "ACTIVE_ONLY")
    if text not in VIEW_TYPES:
        raise invalid(f"Invalid view type {view_type!r}: ACTIVE_ONLY, DELETED_ONLY or ALL.")
    return {
        "ACTIVE_ONLY": {"active"},
        "1": {"active"},
        "DELETED_ONLY": {"deleted"},
        "2": {"deleted"},
    }.get(text, {"active", "deleted"})


def _page(items: list[Any], max_results: int, token: str | None) -> tuple[list[Any], str | None]:
    offset = filters.page_offset(token)
    page = items[offset : offset + max_results]
    following = offset + max_results
    return page, filters.page_token(following) if following < len(items) else None


def _user_names(owner_ids: set[int]) -> dict[int, str]:
    users = get_user_model().objects.filter(pk__in=owner_ids)
    return {user.pk: user.get_username() for user in users}


def runs_json(trials: list[Trial]) -> list[dict[str, Any]]:
    """``run_json`` of each trial (their experiments loaded), with two queries in all."""
    live = set(
        TrialRun.objects.filter(trial__in=trials, unmanaged__isnull=False)
        .exclude(state=RunState.EXITED)
        .values_list("trial_id", "run_id")
    )
    names = _user_names({t.experiment.owner_id for t in trials})
    return [
        run_json(t, t.experiment, (t.id, t.run_id) in live, names.get(t.experiment.owner_id, ""))
        for t in trials
    ]


def search_runs(user: Any, body: dict[str, Any]) -> dict[str, Any]:
    """``runs/search``: the runs of ``experiment_ids`` matching ``filter``, sorted by
    ``order_by``, a page of ``max_results`` at ``page_token``."""
    ids = body.get("experiment_ids") or []
    if isinstance(ids, str):
        ids = [ids]
    if not ids:
        raise invalid("experiment_ids must name at least one experiment.")
    experiments = [experiment_of(user, i) for i in ids]
    clauses = filters.parse_filter(body.get("filter"))
    order = filters.parse_order_by(body.get("order_by"))
    stages = _stage_filter(body.get("run_view_type"))
    max_results = _max_results(body.get("max_results"))
    trials = list(
        Trial.objects.filter(experiment__in=experiments)
        .select_related("experiment")
        .defer(*blob_fields("experiment__"))
    )
    runs = [
        run
        for run in runs_json(trials)
        if run["info"]["lifecycle_stage"] in stages and filters.matches(run_facts(run), clauses)
    ]
    by_facts = {id(run): run for run in runs}
    facts = [{**run_facts(run), "_run": id(run)} for run in runs]
    sorted_runs = [by_facts[f["_run"]] for f in filters.ordered(facts, order, RUN_TIE_BREAKS)]
    page, token = _page(sorted_runs, max_results, body.get("page_token"))
    answer: dict[str, Any] = {"runs": page}
    if token:
        answer["next_page_token"] = token
    return answer


def _experiment_facts(experiment: Experiment) -> dict[str, Any]:
    data = experiment_json(experiment)
    return {
        "metrics": {},
        "params": {},
        "tags": {},
        "attributes": {
            "name": experiment.name,
            "experiment_id": experiment.id,
            "creation_time": data["creation_time"],
            "last_update_time": data["last_update_time"],
        },
        "_json": data,
    }


def search_experiments(user: Any, body: dict[str, Any]) -> dict[str, Any]:
    """``experiments/search``: every experiment the caller may read (``registry.authz``), filtered on ``name``/``creation_time``/``last_update_time``, sorted and paged."""
    attributes = filters.EXPERIMENT_ATTRIBUTES
    clauses = filters.parse_filter(body.get("filter"), attributes)
    order = filters.parse_order_by(body.get("order_by"), attributes)
    stages = _stage_filter(body.get("view_type"))
    max_results = _max_results(body.get("max_results"))
    rows = scoped(Experiment.objects.without_blobs(), user).order_by("-id")
    if stages == {"active"}:
        rows = rows.exclude(state__in=DELETION_STATES)
    elif stages == {"deleted"}:
        rows = rows.filter(state__in=DELETION_STATES)
    facts = [f for f in map(_experiment_facts, rows) if filters.matches(f, clauses)]
    page, token = _page(
        filters.ordered(facts, order, EXPERIMENT_TIE_BREAKS), max_results, body.get("page_token")
    )
    answer: dict[str, Any] = {"experiments": [f["_json"] for f in page]}
    if token:
        answer["next_page_token"] = token
    return answer


def metric_history(found: Trial, key: Any, max_results: Any, token: Any) -> dict[str, Any]:
    """``metrics/get-history``: every value of metric ``key`` in step order, with its step
    and report time (ms); pages of at most ``HISTORY_PAGE``."""
    if not isinstance(key, str) or not key:
        raise invalid("metric_key must be a non-empty string.")
    summary = found.summary_metrics or {}
    group, name = next(
        ((g, n) for g, n in series_of_key(key) if n in summary.get(g, {})), (None, None)
    )
    if group is None:
        return {"metrics": []}
    limit = _max_results(max_results, HISTORY_PAGE, HISTORY_PAGE)
    offset = filters.page_offset(token if isinstance(token, str) else None)
    rows: list[Any] = list(
        MetricReport.objects.filter(trial=found, group=group, metrics__has_key=name)
        .order_by("steps_completed")
        .values_list("steps_completed", "reported_at", "metrics")[offset : offset + limit + 1]
    )
    out = []
    for step, reported_at, metrics in rows[:limit]:
        value = metric_number(metrics.get(name))
        if value is not None:
            out.append(
                {
                    "key": key,
                    "value": json_number(value),
                    "timestamp": millis(reported_at),
                    "step": step,
                }
            )
    answer: dict[str, Any] = {"metrics": out}
    if len(rows) > limit:
        answer["next_page_token"] = filters.page_token(offset + limit)
    return answer
