"""``SearcherContext``: how long to train, and reporting progress / the searcher metric back.

Mirrors Determined's ``core.SearcherContext``: ``operations()`` yields ``SearcherOperation``s;
train until ``op.length`` (in the configured unit), then ``op.report_completed(metric)``.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Iterator
from typing import Any, Protocol

import requests
from pydantic import ValidationError

from headway.client import APIError, NotFoundError, RegistryAPI, Session
from headway.core._distributed import DistributedContext
from headway.early_exit import EarlyExitReason
from headway.expconf import Unit
from headway.metric_values import encode_float

logger = logging.getLogger("headway.core")

PROGRESS_MIN_INTERVAL_S = 1.0  # report_progress() POSTs at most this often


class SearcherMode(enum.Enum):
    """Which ranks may iterate ``operations()``.

    - ``WorkersAskChief`` (default): all ranks iterate; the chief's operations are broadcast.
    - ``ChiefOnly``: only the chief iterates.
    """

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"


class SearcherReporter(Protocol):
    """Where operations report to (registry or local log)."""

    def progress(self, fraction: float) -> None: ...

    def completed(self, length: int, metric: Any) -> int | None: ...

    def early_exit(self, reason: EarlyExitReason) -> None: ...


class LocalSearcherReporter:
    """Local mode: log progress and completion."""

    def progress(self, fraction: float) -> None:
        """Log the progress fraction."""
        logger.info("searcher progress: %.1f%%", 100.0 * fraction)

    def completed(self, length: int, metric: Any) -> int | None:
        """Log the searcher metric; there is never a next operation."""
        logger.info("searcher operation of length %d completed, metric %s", length, metric)
        return None

    def early_exit(self, reason: EarlyExitReason) -> None:
        """Log the early exit (there is no searcher to replace the trial)."""
        logger.info("trial exits its search early: %s", reason.value)


class RegistrySearcherReporter:
    """Managed mode: ``RegistryAPI.trial_progress`` and ``trial_searcher_completed``.

    A registry without these endpoints (404) is logged once, not raised.
    """

    def __init__(self, session: Session, trial_id: int) -> None:
        # Reports are idempotent on the registry, so they retry with the session's budget;
        # progress is cosmetic and must never hold up training: one attempt.
        self._api = RegistryAPI.from_session(session)
        self._progress_api = RegistryAPI.from_session(session.with_retry(0))
        self._trial_id = trial_id
        self._missing_logged = False

    def progress(self, fraction: float) -> None:
        """Best effort: failures are logged, never raised (progress is cosmetic)."""
        try:
            self._progress_api.trial_progress(self._trial_id, fraction)
        except (APIError, requests.RequestException, ValidationError) as exc:
            self._log_failure("progress", exc)

    def completed(self, length: int, metric: Any) -> int | None:
        """Report the op; return the next op's length if the registry's answer names one.

        The answer may carry ``{"next_length": N}`` (adaptive searchers); anything else means
        no further operation.
        """
        try:
            answer = self._api.trial_searcher_completed(
                self._trial_id, length=length, metric=metric
            )
        except NotFoundError as exc:
            self._log_failure("searcher/completed", exc)
            return None
        return answer.next_length

    def early_exit(self, reason: EarlyExitReason) -> None:
        """``RegistryAPI.trial_searcher_early_exit``; raises ``APIError`` when it fails (the
        searcher must hear it, or it waits for this trial's result)."""
        self._api.trial_searcher_early_exit(self._trial_id, reason.value)

    def _log_failure(self, what: str, exc: Exception) -> None:
        if not self._missing_logged:
            self._missing_logged = True
            logger.warning("could not report searcher %s: %s", what, exc)
        else:
            logger.debug("could not report searcher %s: %s", what, exc)


class SearcherOperation:
    """One unit of work from the searcher: train until ``length`` (in the configured unit).

    Arguments:
        length (int): the target, in ``SearcherContext.get_configured_units()``.
        is_chief (bool): whether this rank may report.
        reporter (SearcherReporter): where reports go.
    """

    def __init__(self, *, length: int, is_chief: bool, reporter: SearcherReporter) -> None:
        self._length = int(length)
        self._is_chief = is_chief
        self._reporter = reporter
        self._completed = False
        self._next_length: int | None = None
        self._last_progress_at = -math.inf

    def __repr__(self) -> str:
        return f"SearcherOperation(length={self._length}, completed={self._completed})"

    @property
    def length(self) -> int:
        """Train until this many units have been completed (absolute, not an increment)."""
        return self._length

    @property
    def completed(self) -> bool:
        """Whether ``report_completed()`` was called."""
        return self._completed

    def report_progress(self, length: float) -> None:
        """Report how far training got, in the configured unit (``0 <= length <= op.length``).

        Sent as ``length / op.length`` (clipped to [0, 1]) at most once per second; calls in
        between are dropped, so it is fine to call it every batch. Chief only.

        Raises:
            RuntimeError: on a non-chief rank, or after ``report_completed()``.
        """
        if not self._is_chief:
            raise RuntimeError("op.report_progress() may only be called on the chief (rank 0)")
        if self._completed:
            raise RuntimeError("op.report_progress() called after op.report_completed()")
        now = time.monotonic()
        if now - self._last_progress_at < PROGRESS_MIN_INTERVAL_S:
            return
        self._last_progress_at = now
        fraction = float(length) / self._length if self._length > 0 else 1.0
        self._reporter.progress(min(max(fraction, 0.0), 1.0))

    def report_completed(self, searcher_metric: Any) -> None:
        """Report that training reached ``op.length``, with the value of ``searcher.metric``.

        Arguments:
            searcher_metric (float): the searcher metric (NaN/±inf sent as strings).

        Raises:
            RuntimeError: on a non-chief rank, or when called twice.
            TypeError: when ``searcher_metric`` is not a number.
        """
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called on the chief (rank 0)")
        if self._completed:
            raise RuntimeError("op.report_completed() was already called for this operation")
        try:
            metric = float(searcher_metric)
        except (TypeError, ValueError):
            raise TypeError(
                f"searcher_metric must be a number, got {type(searcher_metric).__name__}"
            ) from None
        self._next_length = self._reporter.completed(self._length, encode_float(metric))
        self._completed = True


class SearcherContext:
    """Gives this trial its training length as ``SearcherOperation``s.

    Built by ``core.init()``. Managed mode: the first operation's length is the one the
    searcher gave this trial (``ClusterInfo.searcher_length``, else the config's
    ``searcher.max_length``, in its unit); when the registry answers ``report_completed`` with
    ``{"next_length": N}`` (e.g. ASHA promoted the trial) a further operation follows, else the
    iteration ends and the trial should finish (checkpoint and return). Local mode: one operation of
    ``core.init(max_length=...)``, or of length 1 in epochs without it (Determined's
    ``DummySearcherContext``).

    Arguments:
        distributed (DistributedContext): ranks.
        reporter (SearcherReporter): where operations report.
        max_length (int | None): length of the first operation; None makes ``operations()``
            raise (no searcher at all).
        unit (Unit | None): the unit of the lengths.
    """

    def __init__(
        self,
        *,
        distributed: DistributedContext,
        reporter: SearcherReporter,
        max_length: int | None,
        unit: Unit | None,
    ) -> None:
        self._dist = distributed
        self._reporter = reporter
        self._max_length = max_length
        self._unit = unit
        self._asked = False  # operations() was called (see warn_if_operations_unasked)
        self._warned_unasked = False

    def warn_if_operations_unasked(self) -> None:
        """Log a warning once (it lands in the trial's log) when this trial runs under a searcher
        that gives operations (the config has ``searcher.max_length``) and the script reports
        validation metrics without ever having called ``operations()``: such a searcher (ASHA
        with ``max_length`` above all) then cannot stop or promote the trial, which trains as
        long as its script says. Called by ``TrainContext.report_validation_metrics``."""
        managed = isinstance(self._reporter, RegistrySearcherReporter)
        if self._asked or self._warned_unasked or not managed or self._max_length is None:
            return
        if self._dist.rank != 0:
            return
        self._warned_unasked = True
        logger.warning(
            "this trial's searcher gives operations (searcher.max_length is set), but the "
            "script reported validation metrics without calling "
            "core_context.searcher.operations(): the searcher cannot stop or promote it. Train "
            "to op.length and call op.report_completed(metric), or (Determined 0.38) remove "
            "searcher.max_length and, for adaptive_asha, set time_metric and max_time"
        )

    def get_configured_units(self) -> Unit | None:
        """The unit of ``op.length`` (``Unit.BATCHES`` / ``EPOCHS`` / ``RECORDS``), or None
        when the length was given as a plain int in local mode."""
        return self._unit

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the searcher this trial leaves the search early, e.g.
        ``EarlyExitReason.INVALID_HP`` for hyperparameters that cannot work (the searcher may
        replace the trial). Call it on the chief, then return or exit 0: the trial ends
        COMPLETED, and its searcher hears ``on_trial_exited_early`` then.

        Raises:
            RuntimeError: on a non-chief rank.
            ValueError: for a reason that is not an ``EarlyExitReason``.
        """
        if self._dist.rank != 0:
            raise RuntimeError("searcher.report_early_exit() may only be called on the chief")
        self._reporter.early_exit(EarlyExitReason(reason))

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """Yield the operations to train, one after another.

        The chief must call ``op.report_completed()`` before asking for the next operation.
        The checks below run when ``operations()`` is called, and the call itself counts as
        asking for them (``warn_if_operations_unasked``), so a harness may take the iterator
        before a validation it reports ahead of the first operation (Determined's
        ``perform_initial_validation``); the first collective runs at the first ``next()``.

        Arguments:
            searcher_mode (SearcherMode): ``WorkersAskChief`` (all ranks iterate; a collective
                per operation) or ``ChiefOnly``.
            auto_ack (bool): accepted for Determined compatibility; no effect.

        Raises:
            RuntimeError: when no length is known, on a non-chief rank in ``ChiefOnly`` mode,
                or when an operation was not completed.
        """
        if searcher_mode is SearcherMode.ChiefOnly and self._dist.rank != 0:
            raise RuntimeError("searcher.operations() is chief-only in SearcherMode.ChiefOnly")
        if self._max_length is None:
            raise RuntimeError(
                "searcher.operations(): the experiment config has no searcher.max_length, so "
                "the searcher gives no operations (Determined 0.38): train for the length your "
                "script chooses and report metrics with core_context.train"
            )
        self._asked = True
        return self._operations(broadcast=searcher_mode is SearcherMode.WorkersAskChief)

    def _operations(self, *, broadcast: bool) -> Iterator[SearcherOperation]:
        is_chief = self._dist.rank == 0
        length: int | None = self._max_length
        while True:
            if broadcast:
                length = self._dist.broadcast(length)
            if length is None:
                return
            op = SearcherOperation(length=length, is_chief=is_chief, reporter=self._reporter)
            yield op
            if is_chief:
                if not op.completed:
                    raise RuntimeError(
                        "op.report_completed() must be called on the chief before the next "
                        "searcher operation is requested"
                    )
                length = op._next_length
