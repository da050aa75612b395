"""``TrainContext``: report training / validation metrics (Determined's ``core.TrainContext``)."""

from __future__ import annotations

import logging
import math
import operator
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any

from headway.client import NotFoundError, RegistryAPI, Session
from headway.core._distributed import DistributedContext
from headway.core._metrics import LocalMetricSink, MetricSink, json_safe_metrics, utc_timestamp
from headway.core._searcher import (
    PROGRESS_MIN_INTERVAL_S,
    LocalSearcherReporter,
    SearcherReporter,
)
from headway.core._tensorboard import TensorboardFiles, TensorboardMode
from headway.early_exit import EarlyExitReason

logger = logging.getLogger("headway.core")

_GROUP_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_VALID_GROUPS = frozenset({"training", "validation"})  # skip the regex for the usual two
# How long a validation report waits for delivery on the chief. A reachable registry answers in
# milliseconds; an unreachable one must not stop training (the master's outages cost running
# trials nothing), so past this the report stays queued and is delivered when the registry is back.
VALIDATION_DELIVERY_WAIT_S = 5.0


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
        reporter (SearcherReporter | None): where ``report_progress`` / ``report_early_exit``
            go (the searcher's reporter); default: the local log.
        tensorboard (TensorboardFiles | None): this process's TensorBoard folder; default: a
            local one that writes nothing automatically.
    """

    def __init__(
        self,
        *,
        sink: MetricSink,
        distributed: DistributedContext,
        run_id: int | None = None,
        session: Session | None = None,
        experiment_id: int | None = None,
        reporter: SearcherReporter | None = None,
        tensorboard: TensorboardFiles | None = None,
    ) -> None:
        self._sink = sink
        self._dist = distributed
        self._run_id = run_id
        self._api = RegistryAPI.from_session(session) if session is not None else None
        self._experiment_id = experiment_id
        self._warned_non_chief = False
        # Set by core.Context: the searcher's check that the script asked for its operations.
        self._on_validation: Callable[[], None] | None = None
        self._reporter: SearcherReporter = reporter or LocalSearcherReporter()
        self._tensorboard = tensorboard or TensorboardFiles(
            mode=TensorboardMode.AUTO, trial_id=0, rank=distributed.rank, auto_write=False
        )
        self._last_progress_at = -math.inf
        self._steps_reported = 0  # the highest steps_completed reported so far

    def _report_system(self, steps_completed: int, metrics: dict[str, float]) -> None:
        """Queue one system-metrics sample (group ``system``); called by the sampler thread.

        An error of an earlier batch is left for the training thread to raise
        (``submit(raise_pending=False)``); the sampler runs on the chief only.
        """
        report: dict[str, Any] = {
            "group": "system",
            "steps_completed": steps_completed,
            "metrics": json_safe_metrics(metrics),
            "timestamp": utc_timestamp(),
        }
        if self._run_id is not None:
            report["run_id"] = self._run_id
        self._sink.submit(report, raise_pending=False)

    def _counters(self) -> tuple[int, int | None]:
        """The sampler's counters for a Core API script: batches reported so far, no samples."""
        return self._steps_reported, None

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
        self._report("training", steps_completed, metrics, epoch, batch_metrics)

    def report_validation_metrics(
        self, steps_completed: int, metrics: dict[str, Any], *, epoch: float | None = None
    ) -> None:
        """Report validation metrics (group ``validation``); same rules as training metrics.

        The experiment's ``searcher.metric`` is read from these reports for best-validation
        tracking. On the chief the call returns once the report (and every report before it)
        was delivered, as Determined's does: validation is rare, the searcher decides on it,
        and a trial killed right after it (SIGKILL, a host agent's process-group kill) must not
        lose it (docs/decisions/metrics.md). While the registry is unreachable it waits at most
        ``VALIDATION_DELIVERY_WAIT_S`` (5 s), then returns with the report still queued: it is
        delivered, in order, once the registry answers.
        """
        if self._on_validation is not None:
            self._on_validation()
        self._report("validation", steps_completed, metrics, epoch, None)
        if self._dist.rank == 0:
            self._sink.flush(timeout=VALIDATION_DELIVERY_WAIT_S)

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
        self._report(group, steps_completed, metrics, epoch, None)

    def _report(
        self,
        group: str,
        steps_completed: int,
        metrics: dict[str, Any],
        epoch: float | None,
        batch_metrics: list[dict[str, Any]] | None,
    ) -> None:
        if not (isinstance(group, str) and (group in _VALID_GROUPS or _GROUP_RE.fullmatch(group))):
            raise ValueError(f"metric group must match [a-z][a-z0-9_]{{0,31}}, got {group!r}")
        if type(steps_completed) is not int or steps_completed < 0:  # the usual int skips it
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
        if steps_completed > self._steps_reported:  # system metrics are keyed by it
            self._steps_reported = steps_completed
        # The caller's values (not the JSON copy), as Determined writes them.
        self._tensorboard.write_metrics(group, steps_completed, metrics, batch_metrics)

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

        Managed mode reads the experiment's ``best_validation`` from the registry; local mode
        returns None.
        """
        if self._api is None or self._experiment_id is None:
            return None
        try:
            experiment = self._api.experiment_get(self._experiment_id)
        except NotFoundError:
            return None
        value = experiment.get("best_validation")
        return None if value is None else float(value)

    def set_status(self, status: str) -> None:
        """Log a short human-readable status line (Determined shows it in the WebUI)."""
        logger.info("status: %s", status)

    def report_progress(self, progress: float) -> None:
        """Report how far training got, as a fraction in [0, 1] (Determined 0.38).

        Shown as the trial's progress (and feeds the experiment's) in the dashboard and in
        ``GET trials/{id}/``, e.g. ``report_progress(steps_completed / max_steps)``. Sent at most
        once a second (1.0 always), best effort: a failed send is logged, never raised, since
        progress must not hold up training. Only the chief's calls are sent; other ranks check
        the value and do nothing else. Locally the value is logged.

        Raises:
            ValueError: when ``progress`` is not a number in [0, 1] (NaN included).
        """
        if isinstance(progress, bool):
            raise ValueError(f"progress must be a number in [0, 1], got {progress!r}")
        try:
            value = float(progress)
        except (TypeError, ValueError):
            raise ValueError(
                f"progress must be a number in [0, 1], got {type(progress).__name__}"
            ) from None
        if not 0.0 <= value <= 1.0:  # also refuses NaN
            raise ValueError(f"progress must be between 0 and 1, got {progress!r}")
        if self._dist.rank != 0:
            return
        now = time.monotonic()
        if value < 1.0 and now - self._last_progress_at < PROGRESS_MIN_INTERVAL_S:
            return
        self._last_progress_at = now
        self._reporter.progress(value)

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the searcher this trial leaves its search early (Determined 0.38's
        ``core.train.report_early_exit``; same effect as ``searcher.report_early_exit``).

        ``EarlyExitReason.INVALID_HP``: the hyperparameters cannot work; return (or exit 0)
        afterwards, the trial ends COMPLETED and ``random`` / ASHA sample a replacement.
        ``with core.init()`` reports it by itself for a raised ``headway.InvalidHP``. Only the
        chief's call is sent (Determined's registry keeps the first report; other ranks'
        duplicates add nothing).

        Raises:
            ValueError: for a reason that is not a ``core.EarlyExitReason``.
            headway.client.APIError: the registry refused the report.
        """
        reason = EarlyExitReason(reason)
        if self._dist.rank != 0:
            return
        self._reporter.early_exit(reason)

    def get_tensorboard_path(self) -> pathlib.Path:
        """The folder for this process's TensorBoard files (created on first call).

        On the cluster: ``tensorboard-rank<r>`` in the run's working folder; locally a fresh
        temporary folder. What is stored from it depends on ``core.init(tensorboard_mode=)``:
        see ``core.TensorboardMode`` and ``upload_tensorboard_files``.
        """
        return self._tensorboard.path

    def upload_tensorboard_files(
        self,
        selector: Callable[[pathlib.Path], bool] = lambda _: True,
        mangler: Callable[[pathlib.Path, int], pathlib.Path] = lambda p, __: p,
    ) -> None:
        """``TensorboardMode.MANUAL``: store the chosen files of ``get_tensorboard_path()``.

        The files for which ``selector(path)`` is true are copied now (a snapshot), renamed to
        ``mangler(relative_path, rank)``, and stored under ``tensorboard/`` in every checkpoint
        the chief saves from then on (Headway keeps TensorBoard files inside checkpoints, where
        ``headway tensorboard EXPERIMENT_ID`` finds them; Determined uploads them to a separate
        storage folder at once). Only the chief's files reach storage.

        Raises:
            RuntimeError: in ``TensorboardMode.AUTO`` (Determined raises too: files are stored
                automatically there).
            ValueError: when ``mangler`` returns a path outside the folder.
        """
        if self._tensorboard.mode is TensorboardMode.AUTO:
            raise RuntimeError(
                "upload_tensorboard_files can only be used in MANUAL mode "
                "(core.init(tensorboard_mode=core.TensorboardMode.MANUAL))"
            )
        count = self._tensorboard.upload(selector, mangler)
        logger.debug("upload_tensorboard_files(): %d files", count)
