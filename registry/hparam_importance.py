"""Hyperparameter importance for a metric of a search: asked for by a request, fitted once per
trial set in the master's Celery worker (``registry.hparam_importance_fit`` has the method).

A request (``importance_answer``) reads only each trial's ``(id, value)`` of the metric, hashes
them into the fit's key, and answers from the ``HparamImportanceFit`` row of that key: its
stored result (200) or failure (422), 202 while it is queued or running, and, with no row yet,
queues one (202) unless ``HEADWAY_HPARAM_IMPORTANCE_MAX_FITS`` fits are already in flight
cluster-wide (429). The worker's task (``run_fit``) then reads the hyperparameters and fits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from registry.errors import InvalidInput, RegistryError
from registry.hparam_importance_fit import FitTimeout, fit, is_number
from registry.models import Experiment, FitState, HparamImportanceFit, Trial

logger = logging.getLogger(__name__)

TASK = "headway.hparam_importance"
# Fewer trials than this give importances that are mostly noise (a forest of bootstrap samples
# of four points); docs/decisions/dashboard.md.
MIN_TRIALS = 5
# Seconds a client waits before asking again: a queued fit of 1,000 trials takes a few seconds.
POLL_SECONDS = 2
# ... and when every fit slot is taken.
BUSY_SECONDS = 10
# A fit still in flight after this many time limits was lost (a worker stopped, or the broker
# lost its message): its slot is freed and the next request queues it again.
LOST_AFTER_LIMITS = 5


class NotEnoughTrials(RegistryError):
    """409: the search has too few trials with a value of the metric yet."""

    status = 409


@dataclass(frozen=True)
class Answer:
    """What ``GET .../hparam-importance/`` answers: status, JSON body, ``Retry-After`` seconds."""

    status: int
    body: dict[str, Any]
    retry_after: int | None = None


def _values(experiment: Experiment, metric: str, *, with_hparams: bool = False) -> list[tuple]:
    """``(trial id, value)`` (with ``with_hparams``: ``(id, value, hparams)``) of each trial with
    a finite value of ``metric``, in id order.

    For the searcher metric the value is the trial's best validation value (the one the searcher
    and the charts rank by); for another validation metric, its last reported value (what W&B
    calls the run's summary), picked here from each trial's validation summary (the database
    returns only that part of the summaries: SQLite's JSON paths cannot name every metric, e.g.
    one with a double quote). A request never decodes the trials' hyperparameters. Raises
    InvalidInput naming ``metric`` (with the known names) when no trial reported it.
    """
    trials = Trial.objects.filter(experiment_id=experiment.id).order_by("id")
    searcher = metric == experiment.searcher_metric
    value: Any = "best_validation" if searcher else KeyTransform("validation", "summary_metrics")
    fields = ("id", value, "hparams") if with_hparams else ("id", value)
    rows = list(trials.values_list(*fields))
    if not searcher:
        known: set[str] = set()
        picked = []
        for row in rows:
            validation = row[1] if isinstance(row[1], dict) else {}
            known.update(validation)
            last = (validation.get(metric) or {}).get("last")
            picked.append((row[0], last, *row[2:]))
        if metric not in known:
            names = sorted(known | {experiment.searcher_metric})
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise InvalidInput(
                {"metric": [f"No trial of experiment {experiment.id} reported it; known: {shown}."]}
            )
        rows = picked
    return [
        (row[0], float(row[1]), *row[2:])
        for row in rows
        if is_number(row[1]) and math.isfinite(row[1])
    ]


def _key(metric: str, rows: list[tuple]) -> str:
    """The fit's key: sha256 of ``metric`` and the ``(id, value)`` pairs (hyperparameters never
    change)."""
    pairs = [list(r[:2]) for r in rows]
    return hashlib.sha256(json.dumps([metric, pairs]).encode()).hexdigest()


def _lost_before() -> Any:
    """In-flight fits queued before this time are lost (``LOST_AFTER_LIMITS``)."""
    limit = settings.HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS
    return timezone.now() - timedelta(seconds=limit * LOST_AFTER_LIMITS)


def importance_answer(experiment: Experiment, metric: str | None = None) -> Answer:
    """The answer to ``GET experiments/{id}/hparam-importance/?metric=`` (docs/rest-api.md).

    ``metric`` defaults to the searcher metric. 200 with the stored result of the current
    trial set (``run_fit``); 422 with its stored failure; 202 (``Retry-After``) while its fit is
    queued or running, or after queuing it; 429 (``Retry-After``) when it is not stored and
    every fit slot is taken. Raises InvalidInput (400, field ``metric``) for a metric no trial
    reported, and NotEnoughTrials (409) with fewer than ``MIN_TRIALS`` trials having a value.
    """
    metric = metric or experiment.searcher_metric
    rows = _values(experiment, metric)
    if len(rows) < MIN_TRIALS:
        raise NotEnoughTrials(
            f"Hyperparameter importance needs at least {MIN_TRIALS} trials with a value of "
            f"{metric}; experiment {experiment.id} has {len(rows)}.",
            {"metric": [f"{len(rows)} of the required {MIN_TRIALS} trials have a value."]},
        )
    key = _key(metric, rows)
    fits = HparamImportanceFit.objects.filter(experiment_id=experiment.id, key=key)
    found = fits.first()
    if found is None or found.slot is not None:
        # Not stored yet (a stored fit holds no slot): lost fits free their slots first, this
        # key's own included, so it can be queued again.
        HparamImportanceFit.objects.filter(
            slot__isnull=False, queued_at__lt=_lost_before()
        ).delete()
        found = found and fits.first()
    if found is None:
        found = _queue(experiment, metric, key)
    if found is None:
        return Answer(
            429,
            {
                "detail": "Every hyperparameter importance fit slot is busy; retry later.",
                "errors": {},
            },
            BUSY_SECONDS,
        )
    if found.state == FitState.DONE:
        return Answer(200, found.result or {})
    if found.state == FitState.FAILED:
        return Answer(422, {"detail": found.error, "errors": {"metric": [found.error]}})
    return Answer(
        202,
        {"detail": f"The importance of {metric} is being computed.", "state": found.state},
        POLL_SECONDS,
    )


def _queue(experiment: Experiment, metric: str, key: str) -> HparamImportanceFit | None:
    """Queue the fit of ``key`` in a free slot and send its task; None when every slot is taken.
    A concurrent request that queued the same key first wins: its row is returned."""
    for slot in range(settings.HEADWAY_HPARAM_IMPORTANCE_MAX_FITS):
        try:
            with transaction.atomic():
                row = HparamImportanceFit.objects.create(
                    experiment_id=experiment.id, metric=metric, key=key, slot=slot
                )
        except IntegrityError:  # the slot is taken, or another request queued this key
            same = HparamImportanceFit.objects.filter(experiment_id=experiment.id, key=key).first()
            if same is not None:
                return same
            continue
        transaction.on_commit(partial(_send, row.id), robust=True)
        return row
    return None


def _send(fit_id: int) -> None:
    current_app.send_task(TASK, args=[fit_id], queue=settings.CELERY_TASK_DEFAULT_QUEUE)


def run_fit(fit_id: int) -> None:
    """(the master's worker) Fit the queued ``HparamImportanceFit`` ``fit_id`` and store its
    result, or its failure when it runs past ``HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS``.

    The result is ``{"experiment_id", "metric", "trials" (how many trials had a value and were
    used), "method": "random_forest", "hparams_varying" (how many hyperparameters vary; at most
    ``MAX_HPARAMS`` of them are fitted and listed), "hparams": [{"name" (dotted for nested
    hparams), "type": "numeric" | "categorical", "importance" (>= 0; they sum to 1, or are all 0
    when the metric does not vary), "correlation" (Pearson's r with the metric, numeric hparams
    only, else None)}]}``, most important first. It is fitted on the trials' values now, which
    may be newer than those of its key: the next request then queues their own fit. A fit that
    is not queued (another worker took it, or it was lost and deleted) is left alone; done, it
    frees its slot and replaces the metric's older results.
    """
    started = time.monotonic()
    claimed = HparamImportanceFit.objects.filter(id=fit_id, state=FitState.QUEUED).update(
        state=FitState.RUNNING
    )
    row = HparamImportanceFit.objects.filter(id=fit_id).first()
    if not claimed or row is None:
        return
    experiment = Experiment.objects.only("id", "config").get(id=row.experiment_id)
    limit = settings.HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS
    done: dict[str, Any] = {"state": FitState.FAILED, "slot": None}
    try:
        rows = _values(experiment, row.metric, with_hparams=True)
        fitted = fit([(hparams, value) for _, value, hparams in rows], deadline=started + limit)
    except FitTimeout as exc:
        done["error"] = (
            f"The importance fit of {row.metric} did not finish within {limit} s ({exc}); it is "
            "tried again when a trial's value changes."
        )
    except Exception as exc:  # stored for the viewers, not retried until the values change
        logger.exception("hyperparameter importance fit %s failed", fit_id)
        done["error"] = f"The importance fit of {row.metric} failed: {type(exc).__name__}."
    else:
        head = {"experiment_id": row.experiment_id, "metric": row.metric, "trials": len(rows)}
        done.update(state=FitState.DONE, result={**head, "method": "random_forest", **fitted})
    with transaction.atomic():
        stored = HparamImportanceFit.objects.filter(id=fit_id, state=FitState.RUNNING).update(
            finished_at=timezone.now(), **done
        )
        if stored:
            HparamImportanceFit.objects.filter(
                experiment_id=row.experiment_id, metric=row.metric, slot__isnull=True
            ).exclude(id=fit_id).delete()
