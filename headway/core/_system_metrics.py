"""System metrics of a running trial: CPU, memory, GPU and throughput, sampled in the background.

W&B, MLflow (system metrics), Determined (profiler) and ClearML chart these per run. Here the
chief's ``core.init()`` starts one daemon thread that sleeps ``interval_s`` between samples
(blocking on an ``Event``: it never spins) and reports each sample as the metric group
``system`` through the trial's own batched metric reporter, so no extra connection, thread or
endpoint is needed. Sources:

- ``psutil``: system-wide CPU utilisation, this process's CPU use and resident memory, system
  memory in use;
- NVIDIA's NVML bindings (``nvidia-ml-py``, imported as ``pynvml``): utilisation and memory of
  each GPU this process may use (``CUDA_VISIBLE_DEVICES``, else all); skipped silently when the
  package or the driver is missing or there is no GPU;
- throughput from counters: the PyTorch harness registers its batch and sample counters
  (``set_counters``); a Core API script gets batches/s from the ``steps_completed`` it reports.

Samples are keyed by ``steps_completed`` (the trial's batches so far) and carry their wall-clock
timestamp, so the dashboard charts them against batches or wall time (docs/decisions/dashboard.md).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from headway.expconf._system_metrics import SystemMetricsConfig

logger = logging.getLogger("headway.core")

SYSTEM_GROUP = "system"
ENV_SWITCH = "HEADWAY_SYSTEM_METRICS"
_MIB = 1024 * 1024

Counters = Callable[[], tuple[int, int | None]]
"""Returns ``(batches trained, samples trained or None)`` so far; called from the sampler thread."""

Report = Callable[[int, dict[str, float]], None]
"""Hands one sample (``steps_completed``, metrics) to the metric reporter."""


def env_switch() -> bool | None:
    """``HEADWAY_SYSTEM_METRICS``: ``0``/``false``/``off`` -> False, ``1``/``true``/``on`` -> True,
    unset or empty -> None (the config decides).

    Raises:
        ValueError: naming the variable for any other value.
    """
    raw = os.environ.get(ENV_SWITCH, "").strip().lower()
    if not raw:
        return None
    if raw in ("0", "false", "off", "no"):
        return False
    if raw in ("1", "true", "on", "yes"):
        return True
    raise ValueError(f"{ENV_SWITCH} must be 0 or 1, got {raw!r}")


def sampler_config(section: SystemMetricsConfig | None, *, managed: bool) -> SystemMetricsConfig:
    """The sampler's settings from the experiment config's ``system_metrics`` (validated with
    the config; None: local mode, the defaults) and the env switch.

    On the cluster (``managed``) the sampler is on unless the config or ``HEADWAY_SYSTEM_METRICS=0``
    turns it off; in local mode only ``HEADWAY_SYSTEM_METRICS=1`` turns it on (a notebook's log
    should not fill with samples).

    Raises:
        ValueError: naming the variable.
    """
    parsed = section if section is not None else SystemMetricsConfig()
    switch = env_switch()
    enabled = parsed.enabled if managed else False
    if switch is not None:
        enabled = switch and (parsed.enabled or not managed)
    return parsed.model_copy(update={"enabled": enabled})


def _visible_gpu_handles() -> list[Any]:
    """NVML handles of the GPUs this process may use, in CUDA's order; [] without NVML or GPUs."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        handles = []
        for item in (v.strip() for v in visible.split(",")):
            if not item:
                continue
            if item.isdigit():
                if int(item) >= count:
                    break  # CUDA ignores this and every later entry
                handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(item)))
            else:  # GPU-<uuid> (or MIG-...): NVML looks those up by UUID
                handles.append(pynvml.nvmlDeviceGetHandleByUUID(item))
        return handles
    except Exception:  # pynvml.NVMLError: no driver, no GPU, a UUID NVML does not know
        return []


class SystemMetricsSampler:
    """A daemon thread that reports one sample of system metrics every ``interval_s`` seconds.

    Metrics of a sample (all floats; names are stable, absent when their source is):
    ``cpu_util_percent`` (all CPUs, 0-100), ``process_cpu_percent`` (this process, 100 per busy
    core), ``process_rss_mib``, ``memory_used_percent``, ``memory_used_mib``,
    ``gpu<i>_util_percent`` (0-100), ``gpu<i>_memory_used_mib`` (``<i>``: CUDA's device number),
    ``batches_per_second`` and ``samples_per_second`` (over the interval, from the counters).

    Arguments:
        report (Report): receives ``(steps_completed, metrics)`` per sample, in the sampler thread.
        interval_s (float): seconds between samples (> 0).
        counters (Counters | None): batch and sample counters; ``set_counters`` can replace them.

    A failing sample is logged once and skipped: system metrics never take training down.
    """

    def __init__(self, report: Report, interval_s: float, counters: Counters | None = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"system_metrics.interval_s must be > 0, got {interval_s!r}")
        self._report = report
        self.interval_s = float(interval_s)
        self._counters: Counters = counters or (lambda: (0, None))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process = psutil.Process()
        self._gpus: list[Any] | None = None  # looked up in the thread: nvmlInit takes ~50 ms
        self._last: tuple[float, int, int | None] | None = None
        self._warned = False

    def set_counters(self, counters: Counters) -> None:
        """Use ``counters`` for ``steps_completed`` and throughput from the next sample on."""
        self._counters = counters
        self._last = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name="headway-system-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the thread; returns at once if it was never started."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def sample(self) -> tuple[int, dict[str, float]]:
        """Take one sample now: ``(steps_completed, metrics)``.

        CPU percentages cover the time since the previous sample (psutil's ``cpu_percent``
        without an interval); the first call primes them and reports 0.
        """
        if self._gpus is None:
            self._gpus = _visible_gpu_handles()
        now = time.monotonic()
        batches, samples = self._counters()
        memory = psutil.virtual_memory()
        metrics: dict[str, float] = {
            "cpu_util_percent": float(psutil.cpu_percent(interval=None)),
            "process_cpu_percent": float(self._process.cpu_percent(interval=None)),
            "process_rss_mib": self._process.memory_info().rss / _MIB,
            "memory_used_percent": float(memory.percent),
            "memory_used_mib": (memory.total - memory.available) / _MIB,
        }
        metrics.update(self._gpu_metrics())
        if self._last is not None:
            then, last_batches, last_samples = self._last
            elapsed = now - then
            if elapsed > 0:
                metrics["batches_per_second"] = max(0, batches - last_batches) / elapsed
                if samples is not None and last_samples is not None:
                    metrics["samples_per_second"] = max(0, samples - last_samples) / elapsed
        self._last = (now, batches, samples)
        return batches, metrics

    def _gpu_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if not self._gpus:
            return out
        import pynvml

        for index, handle in enumerate(self._gpus):
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(handle)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except pynvml.NVMLError:
                continue
            out[f"gpu{index}_util_percent"] = float(util.gpu)
            out[f"gpu{index}_memory_used_mib"] = memory.used / _MIB
        return out

    def _run(self) -> None:
        try:
            self.sample()  # primes the CPU percentages and the throughput counters
        except Exception:
            logger.exception("system metrics: the first sample failed; sampling stops")
            return
        while not self._stop.wait(self.interval_s):
            try:
                steps, metrics = self.sample()
                self._report(steps, metrics)
            except Exception:
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "system metrics: a sample failed (later ones are tried)", exc_info=True
                    )
