"""``TrainContext``: report training / validation metrics (Determined's ``core.TrainContext``)."""

from __future__ import annotations

import logging
import operator
import re
from typing import Any

from headway.client import NotFoundError, Session
from headway.core._distributed import DistributedContext
from headway.core._metrics import LocalMetricSink, MetricSink, json_safe_metrics, utc_timestamp

logger = logging.getLogger("headway.core")

_GROUP_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_VALID_GROUPS = frozenset({"training", "validation"})  # skip the regex for the usual two


def check_steps_completed(value: Any) -> int:
    """Return ``value`` as a non-negative int (numpy / torch integers accepted).

    Raises:
        ValueError: naming ``steps_completed`` for a bool, float, negative or non-integer value.
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        steps = operator.index(value)
    except TypeError:
        raise ValueError(
            f"steps_completed must be an int, got {type(value).__name__} {value!r}"
        ) from None
    if steps < 0:
        raise ValueError(f"steps_completed must be >= 0, got {steps}")
    return steps


class TrainContext:
    """Reports metrics for the current trial.

    Each call validates and copies the metrics in the caller's thread (so a bad value fails where
    it was reported) and hands them to a sink: in managed mode a background thread that batches
    POSTs to the registry; in local mode a logger that also keeps the reports in memory
    (``reported_metrics()``). Only the chief (rank 0) reports, as in Determined; on other ranks
    the calls validate their input and then do nothing.

    Built by ``core.init()``; not meant to be constructed by users.

    Arguments:
        sink (MetricSink): where reports go.
        distributed (DistributedContext): this process's ranks.
        run_id (int | None): the trial run reported for (None in local mode).
        session (Session | None), experiment_id (int | None): for registry reads (managed mode).
    """

    def __init__(
        self,
        *,
        sink: MetricSink,
        distributed: DistributedContext,
        run_id: int | None = None,
        session: Session | None = None,
        experiment_id: int | None = None,
    ) -> None:
        self._sink = sink
        self._dist = distributed
        self._run_id = run_id
        self._session = session
        self._experiment_id = experiment_id
        self._warned_non_chief = False

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
        *,
        epoch: float | None = None,
    ) -> None:
        """Report training metrics (group ``training``) at ``steps_completed`` batches.

        Arguments:
            steps_completed (int): batches trained so far in this trial (>= 0).
            metrics (dict): metric name -> value (numbers, numpy scalars, 0-d tensors, bools,
                strings, or lists/dicts of those; NaN/±inf allowed).
            batch_metrics (list[dict] | None): per-batch metrics; validated, not stored by the
                registry (accepted for compatibility with Determined).
            epoch (float | None): optional epoch position, stored with the report.

        Raises:
            TypeError: naming the key of a value that is not JSON-serializable.
            ValueError: for a negative or non-integer ``steps_completed``.
            headway.client.APIError: the registry rejected an earlier batch (raised once).
        """
        if batch_metrics is not None:
            for index, batch in enumerate(batch_metrics):
                json_safe_metrics(batch, what=f"batch_metrics[{index}] metric")
        self.report_metrics("training", steps_completed, metrics, epoch=epoch)

    def report_validation_metrics(
        self, steps_completed: int, metrics: dict[str, Any], *, epoch: float | None = None
    ) -> None:
        """Report validation metrics (group ``validation``); same rules as training metrics.

        The experiment's ``searcher.metric`` is read from these reports for best-validation
        tracking.
        """
        self.report_metrics("validation", steps_completed, metrics, epoch=epoch)

    def report_metrics(
        self,
        group: str,
        steps_completed: int,
        metrics: dict[str, Any],
        *,
        epoch: float | None = None,
    ) -> None:
        """Report metrics in any group (``[a-z][a-z0-9_]{0,31}``, e.g. ``"inference"``).

        Raises:
            ValueError: for a bad group name or ``steps_completed``.
            TypeError: naming the key of a value that is not JSON-serializable.
        """
        if not (isinstance(group, str) and (group in _VALID_GROUPS or _GROUP_RE.fullmatch(group))):
            raise ValueError(f"metric group must match [a-z][a-z0-9_]{{0,31}}, got {group!r}")
        steps_completed = check_steps_completed(steps_completed)
        safe = json_safe_metrics(metrics)
        if self._dist.rank != 0:
            if not self._warned_non_chief:
                self._warned_non_chief = True
                logger.debug(
                    "metrics reported on rank %d are ignored (chief only)", self._dist.rank
                )
            return
        report: dict[str, Any] = {
            "group": group,
            "steps_completed": steps_completed,
            "metrics": safe,
            "timestamp": utc_timestamp(),
        }
        if self._run_id is not None:
            report["run_id"] = self._run_id
        if epoch is not None:
            report["epoch"] = float(epoch)
        self._sink.submit(report)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every metric reported so far was delivered; False if ``timeout`` passed.

        ``Context.__exit__`` flushes anyway; call this only when you need delivery earlier.
        """
        return self._sink.flush(timeout)

    def reported_metrics(self, group: str | None = None) -> list[dict[str, Any]]:
        """Local mode only: the reports made so far (``{"group", "steps_completed", "metrics",
        "timestamp"}``), optionally of one group. Managed mode keeps nothing and returns [].
        """
        if not isinstance(self._sink, LocalMetricSink):
            return []
        return [r for r in self._sink.reports if group is None or r["group"] == group]

    def get_experiment_best_validation(self) -> float | None:
        """Best value of the searcher metric over the experiment's trials, or None.

        Managed mode reads ``best_validation`` of ``GET experiments/{id}/``; local mode returns
        None.
        """
        if self._session is None or self._experiment_id is None:
            return None
        try:
            experiment = self._session.get(f"experiments/{self._experiment_id}/")
        except NotFoundError:
            return None
        value = experiment.get("best_validation")
        return None if value is None else float(value)

    def set_status(self, status: str) -> None:
        """Log a short human-readable status line (Determined shows it in the WebUI)."""
        logger.info("status: %s", status)
