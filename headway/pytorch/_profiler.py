"""Profiling during ``Trainer.fit``: ``context.set_profiler`` traces and system metrics.

Two Determined features (0.38.1, ``pytorch/_pytorch_trial.py`` and ``core/_profiler.py``):

- ``context.set_profiler(...)``: a ``torch.profiler.profile`` whose traces go to the TensorBoard
  folder (so they travel inside checkpoints); the harness steps it after every training batch.
- ``fit(profiling_enabled=True)``: system metrics sampled in a background thread and reported
  as the metric group ``"profiling"`` (Determined reports them to its master on-cluster and
  warns that profiling is not supported locally; Headway reports them in both modes).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._trial import PyTorchTrial

logger = logging.getLogger("headway.pytorch")

PROFILING_GROUP = "profiling"


@contextlib.contextmanager
def torch_profiler(trial: PyTorchTrial, context: PyTorchTrialContext) -> Iterator[None]:
    """Run ``context.profiler`` (if set) for the block, stepping it after each ``train_batch``.

    The step is added by shadowing ``trial.train_batch`` with an instance attribute for the
    duration of the block, so the training loop needs no profiler code.
    """
    profiler = context.profiler
    if profiler is None:
        yield
        return
    original = trial.train_batch

    def train_batch(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        profiler.step()
        return result

    profiler.start()
    trial.train_batch = train_batch  # type: ignore[method-assign]
    try:
        yield
    finally:
        del trial.train_batch  # the class's method again
        profiler.stop()


def _read_cpu_times() -> tuple[int, int] | None:
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields), idle


def _read_memory_free_gb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1024 * 1024)
    except (OSError, ValueError):
        return None
    return None


class SystemMetricsSampler:
    """Samples CPU use and free memory every ``interval`` s and reports their means.

    Every ``samples_per_report`` samples the chief reports ``{"cpu_util_simple": percent,
    "memory_free": GiB}`` in group ``"profiling"`` at the trial's current batch count
    (Determined's names for these two system metrics). Reads ``/proc`` (Linux); elsewhere it logs
    once and reports nothing.

    Arguments:
        context (PyTorchTrialContext): gives the batch count and the Core API context.
        interval (float): seconds between samples (Determined's ``sampling_interval``, >= 0.1).
        samples_per_report (int): samples averaged per report (>= 1).

    Raises:
        ValueError: for ``interval`` < 0.1 or ``samples_per_report`` < 1, naming it.
    """

    def __init__(
        self, context: PyTorchTrialContext, interval: float = 1.0, samples_per_report: int = 10
    ) -> None:
        if interval < 0.1:
            raise ValueError(f"sampling interval must be >= 0.1 s, got {interval}")
        if not isinstance(samples_per_report, int) or samples_per_report < 1:
            raise ValueError(f"samples_per_report must be an int >= 1, got {samples_per_report}")
        self._context = context
        self._interval = interval
        self._per_report = samples_per_report
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="headway-profiler", daemon=True)

    def __enter__(self) -> SystemMetricsSampler:
        if self._context.distributed.rank == 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        last = _read_cpu_times()
        if last is None:
            logger.warning("fit(profiling_enabled=True): no /proc/stat here; no system metrics")
            return
        cpu: list[float] = []
        memory: list[float] = []
        while not self._stop.wait(self._interval):
            now = _read_cpu_times()
            free = _read_memory_free_gb()
            if now is None or free is None:
                continue
            total, idle = now[0] - last[0], now[1] - last[1]
            last = now
            cpu.append(100.0 * (total - idle) / total if total > 0 else 0.0)
            memory.append(free)
            if len(cpu) >= self._per_report:
                self._report(cpu, memory)
                cpu, memory = [], []

    def _report(self, cpu: list[float], memory: list[float]) -> None:
        metrics = {
            "cpu_util_simple": sum(cpu) / len(cpu),
            "memory_free": sum(memory) / len(memory),
        }
        try:
            self._context._core.train.report_metrics(
                group=PROFILING_GROUP,
                steps_completed=self._context._position.batches_trained,
                metrics=metrics,
            )
        except Exception:  # profiling must never take training down
            logger.exception("could not report profiling metrics")


def _count_for_system_metrics(context: PyTorchTrialContext) -> None:
    """Give the Core API's system-metrics sampler (if on) the harness's own counters: batches
    trained, and samples as batches x ``global_batch_size`` when that hyperparameter is set."""
    sampler = getattr(context._core, "system_metrics", None)  # a core.Context has it
    if sampler is None:
        return
    position = context._position
    gbs = context.get_hparams().get("global_batch_size")
    per_batch = gbs if isinstance(gbs, int) and not isinstance(gbs, bool) and gbs > 0 else None

    def counters() -> tuple[int, int | None]:
        batches = position.batches_trained
        return batches, None if per_batch is None else batches * per_batch

    sampler.set_counters(counters)


def fit_extras(
    trial: PyTorchTrial, context: PyTorchTrialContext, profiling_enabled: bool
) -> contextlib.ExitStack:
    """What ``Trainer.fit`` runs around training besides the loop; close it when fit ends.

    Adds ``load_data.json``, ``code/`` and ``tensorboard/`` to every checkpoint
    (``CheckpointFiles``), runs ``context.set_profiler``'s profiler and, with
    ``profiling_enabled``, the system-metrics sampler.
    """
    from headway.pytorch._checkpointing import CheckpointFiles

    stack = contextlib.ExitStack()
    try:
        files = CheckpointFiles(context, type(trial))
        stack.callback(files.close)
        files.install()
        _count_for_system_metrics(context)
        if profiling_enabled:
            stack.enter_context(SystemMetricsSampler(context))
        stack.enter_context(torch_profiler(trial, context))
    except BaseException:
        stack.close()
        raise
    return stack
