"""``core.Context``: the one object a training script talks to (``core.init()`` builds it,
``headway.core._init``), as Determined's ``core/_context.py``."""

from __future__ import annotations

import atexit
import logging
import types
from collections.abc import Callable

from headway._info import ClusterInfo
from headway.core._checkpoint import CheckpointContext
from headway.core._distributed import DistributedContext
from headway.core._metrics import MetricSink
from headway.core._preempt import PreemptContext
from headway.core._searcher import SearcherContext
from headway.core._sigterm import install_flush_on_sigterm
from headway.core._system_metrics import SystemMetricsSampler
from headway.core._train import TrainContext
from headway.early_exit import EarlyExitReason, InvalidHP

logger = logging.getLogger("headway.core")

CLOSE_TIMEOUT_S = 60.0  # longest __exit__ waits for queued metrics to be delivered (local)


class Context:
    """The Core API: ``.train``, ``.checkpoint``, ``.preempt``, ``.searcher``, ``.distributed``.

    Made by ``core.init()``. Use it as a context manager: ``__enter__`` starts the background
    threads (metric reporter, preemption watcher); ``__exit__`` delivers queued metrics (waiting
    at most 60 s locally, the outage budget ``HEADWAY_MASTER_OUTAGE_SECONDS`` in managed mode,
    with a warning) and stops them. A ``headway.InvalidHP`` raised in the
    block is reported (``searcher.report_early_exit(EarlyExitReason.INVALID_HP)``) and
    swallowed, so the process exits 0 and the searcher can replace the trial. ``start()``/``close()`` do the same
    without a ``with`` block.

    Attributes:
        train (TrainContext), checkpoint (CheckpointContext), preempt (PreemptContext),
        searcher (SearcherContext), distributed (DistributedContext).
        info (ClusterInfo | None): what the worker told this process; None in local mode.
        system_metrics (SystemMetricsSampler | None): the chief's system-metrics sampler
            (metric group ``system``), started and stopped with the context; None when off
            (``system_metrics.enabled: false``, ``HEADWAY_SYSTEM_METRICS=0``, local mode
            without ``HEADWAY_SYSTEM_METRICS=1``, or a rank other than 0).
    """

    def __init__(
        self,
        *,
        train: TrainContext,
        checkpoint: CheckpointContext,
        preempt: PreemptContext,
        searcher: SearcherContext,
        distributed: DistributedContext,
        info: ClusterInfo | None,
        metric_sink: MetricSink,
        close_timeout: float = CLOSE_TIMEOUT_S,
    ) -> None:
        self.train = train
        self.checkpoint = checkpoint
        self.preempt = preempt
        self.searcher = searcher
        self.distributed = distributed
        self.info = info
        self._metric_sink = metric_sink
        self._close_timeout = close_timeout
        train._on_validation = getattr(searcher, "warn_if_operations_unasked", None)
        self._closed = False
        # Called with "did the work fail?" at the end of close(): core_v2 ends an unmanaged
        # run there (COMPLETED, or ERROR after an exception in the ``with`` block).
        self._close_hooks: list[Callable[[bool], None]] = []
        self._failed = False
        self.system_metrics: SystemMetricsSampler | None = None
        self._uninstall_sigterm: Callable[[], None] | None = None
        # Safety net for scripts that never close the context (or report without ``with``):
        # deliver queued metrics at interpreter exit (atexit runs while daemon threads live).
        atexit.register(self._close_at_exit)

    def start(self) -> None:
        """Start the background threads (idempotent); in managed mode, also have SIGTERM
        deliver the queued metrics before the process ends (``_sigterm``)."""
        self._metric_sink.start()
        if self.info is not None and self._uninstall_sigterm is None:
            self._uninstall_sigterm = install_flush_on_sigterm(self._metric_sink.flush)
        self.preempt.start()
        if self.system_metrics is not None:
            self.system_metrics.start()

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except Exception:
            logger.exception("while closing the Core API context at exit")

    def close(self, timeout: float | None = None) -> None:
        """Deliver queued metrics (at most ``timeout`` s) and stop the background threads.

        ``timeout`` defaults to 60 s in local mode and to the outage budget
        (``HEADWAY_MASTER_OUTAGE_SECONDS``) in managed mode, so a trial that ends while the
        registry is down waits for it rather than dropping its last metrics.

        Raises:
            headway.client.APIError: the registry rejected a metrics batch that was not raised
                by a later report yet.
        """
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._close_at_exit)
        if self._uninstall_sigterm is not None:
            self._uninstall_sigterm()
        if self.system_metrics is not None:
            self.system_metrics.close()  # before the reporter: its last sample is delivered
        self.preempt.close()
        # Ends the TensorBoard writer thread after writing what is queued (closes its file).
        self.train._tensorboard.close()
        try:
            error = self._metric_sink.close(self._close_timeout if timeout is None else timeout)
        finally:
            for hook in self._close_hooks:
                hook(self._failed)
        if error is not None:
            raise error

    def __enter__(self) -> Context:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool | None:
        invalid_hp = isinstance(exc, InvalidHP)
        self._failed = self._failed or (exc is not None and not invalid_hp)
        if invalid_hp:
            logger.warning("InvalidHP: %s; leaving the search early", exc)
            if self.distributed.rank == 0:
                self.searcher.report_early_exit(EarlyExitReason.INVALID_HP)
        try:
            self.close()
        except Exception:
            if exc is None:
                raise
            # The block already failed: keep its exception, log ours.
            logger.exception("while closing the Core API context")
        # InvalidHP was handled: the process goes on (and exits 0, the trial COMPLETED).
        return True if invalid_hp else None
