"""Metric helpers and config keys of the ``TorchTrainer`` API, as RaySGD's ``ray.util.sgd.utils``.

A RaySGD program that imports ``from ray.util.sgd.utils import BATCH_SIZE, AverageMeterCollection``
ports by importing them from ``headway.torch_trainer.utils`` (or ``headway.torch_trainer``).
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

# Config key of the *global* batch size: ``TorchTrainer`` divides it among its workers and each
# worker's ``config[BATCH_SIZE]`` holds its share (RaySGD's value, so saved configs still match).
BATCH_SIZE = "*batch_size"
# Per-batch metric read by the default ``train_epoch`` / ``validate`` as the averaging weight.
NUM_SAMPLES = "num_samples"
BATCH_COUNT = "batch_count"
# Keys of the ``info`` dict passed to ``train_epoch`` (RaySGD's torch/constants.py values).
NUM_STEPS = "__num_steps__"
USE_FP16 = "__use_fp16__"
SCHEDULER_STEP_BATCH = "batch"
SCHEDULER_STEP_EPOCH = "epoch"
SCHEDULER_STEP_MANUAL = "manual"
VALID_SCHEDULER_STEP = (SCHEDULER_STEP_BATCH, SCHEDULER_STEP_EPOCH, SCHEDULER_STEP_MANUAL)


class AverageMeter:
    """Running average and most recent value of one metric (RaySGD's ``AverageMeter``).

    ``update(val, n)`` weighs ``val`` by ``n`` (e.g. the batch's sample count)::

        meter = AverageMeter()
        meter.update(5)
        meter.update(10, n=4)  # meter.val == 10, meter.avg == 9.0, meter.sum == 45
    """

    def __init__(self) -> None:
        self.val: float = 0.0
        self.avg: float = 0.0
        self.sum: float = 0.0
        self.count: int = 0

    def reset(self) -> None:
        """Forget every value."""
        self.__init__()  # type: ignore[misc]

    def update(self, val: float, n: int = 1) -> None:
        """Add ``val`` with weight ``n`` (``n`` >= 1)."""
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class AverageMeterCollection:
    """One ``AverageMeter`` per metric name, fed one batch at a time (RaySGD's class).

    ``summary()`` returns ``batch_count``, ``num_samples`` (the sum of the ``n`` passed), and for
    each metric ``NAME`` its weighted mean and ``last_NAME``, its value in the last batch::

        meters = AverageMeterCollection()
        meters.update({"loss": 0.5, "acc": 0.5}, n=32)
        meters.update({"loss": 0.1, "acc": 0.9}, n=32)
        meters.summary()  # {"batch_count": 2, "num_samples": 64, "loss": 0.3, "last_loss": 0.1,
                          #  "acc": 0.7, "last_acc": 0.9}
    """

    def __init__(self) -> None:
        self._batch_count = 0
        self.n = 0
        self._meters: collections.defaultdict[str, AverageMeter] = collections.defaultdict(
            AverageMeter
        )

    def update(self, metrics: Mapping[str, float], n: int = 1) -> None:
        """Record one batch: each value of ``metrics`` weighted by ``n`` samples."""
        self._batch_count += 1
        self.n += n
        for metric, value in metrics.items():
            self._meters[metric].update(value, n=n)

    def summary(self) -> dict[str, float]:
        """The averages so far (see the class docstring for the keys)."""
        stats: dict[str, float] = {BATCH_COUNT: self._batch_count, NUM_SAMPLES: self.n}
        for metric, meter in self._meters.items():
            stats[str(metric)] = meter.avg
            stats["last_" + str(metric)] = meter.val
        return stats


class TimerCollection:
    """Wall-clock timers by name for ``profile=True`` (RaySGD's ``TimerCollection``).

    ``record(name)`` is a context manager that times its block when the collection is enabled
    and does nothing otherwise, so the default loops can call it on every batch for free.
    ``stats()`` returns ``{"mean_NAME_s": seconds}`` (and ``last_NAME_s`` with ``last=True``).
    """

    def __init__(self) -> None:
        self._enabled = True
        self._samples: dict[str, list[float]] = {}

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def reset(self) -> None:
        self._samples = {}

    @contextlib.contextmanager
    def _timed(self, key: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._samples.setdefault(key, []).append(time.perf_counter() - start)

    def record(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Time the ``with`` block under ``key`` (seconds), when enabled."""
        return self._timed(key) if self._enabled else contextlib.nullcontext()

    def stats(self, mean: bool = True, last: bool = False) -> dict[str, Any]:
        """``mean_KEY_s`` (and ``last_KEY_s``) for every key timed since the last reset."""
        out: dict[str, Any] = {}
        for key, samples in self._samples.items():
            if samples:
                if mean:
                    out[f"mean_{key}_s"] = sum(samples) / len(samples)
                if last:
                    out[f"last_{key}_s"] = samples[-1]
        return out
