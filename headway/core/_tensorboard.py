"""TensorBoard files of a trial: where they are written, metrics written there, and how they
reach storage (Determined's ``core.TensorboardMode``, ``TrainContext.get_tensorboard_path`` and
``upload_tensorboard_files``, and ``tensorboard.metric_writers.BatchMetricWriter``).

Determined syncs the folder to ``<storage>/tensorboard/experiment/<id>/trial/<id>/``. Headway's
storage addresses checkpoints only, so the folder travels inside every checkpoint the chief
stores, as ``tensorboard/`` (docs/decisions/sdk.md, "TensorBoard files travel inside checkpoints");
``headway tensorboard EXPERIMENT_ID`` reads it from each trial's latest checkpoint.
"""

from __future__ import annotations

import atexit
import enum
import itertools
import logging
import math
import numbers
import os
import pathlib
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headway.core._tb_event_file import ScalarEventFile

logger = logging.getLogger("headway.core")

TENSORBOARD_DIR = "tensorboard"
"""Name of the folder holding TensorBoard files inside a checkpoint."""

TAG_PREFIX = "Headway/"
"""Prefix of the tags of automatically written metrics (Determined writes ``Determined/``)."""
# The writer thread writes (and flushes) at most this often; drain() and close() do not wait.
WRITE_INTERVAL_S = 1.0


class TensorboardMode(enum.Enum):
    """How TensorBoard files are handled (Determined's ``core.TensorboardMode``).

    - ``AUTO`` (default): on the cluster the chief writes every reported training and
      validation metric to ``train.get_tensorboard_path()`` and its folder is stored with every
      checkpoint it saves. Locally nothing is written (as Determined's local mode).
    - ``MANUAL``: nothing is written or stored automatically; the script writes its own files
      and calls ``train.upload_tensorboard_files()``.
    """

    AUTO = "AUTO"
    MANUAL = "MANUAL"


def default_tensorboard_path(trial_id: int, rank: int) -> pathlib.Path:
    """A fresh folder for this process's TensorBoard files.

    On the cluster: ``tensorboard-rank<r>`` in the run's working folder (next to
    ``cluster_info.json``, outside the model code, removed with the run folder). Locally: a new
    temporary folder, as Determined uses ``/tmp/tensorboard-...``.
    """
    info_file = os.environ.get("HEADWAY_CLUSTER_INFO")
    if info_file:
        path = pathlib.Path(info_file).parent / f"tensorboard-rank{rank}"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return pathlib.Path(tempfile.mkdtemp(prefix=f"headway-tensorboard-trial{trial_id}-rank{rank}-"))


def make_summary_writer(path: pathlib.Path) -> Any:
    """A ``torch.utils.tensorboard.SummaryWriter`` writing into ``path``.

    Raises:
        ImportError: naming the ``tensorboard`` package when it is not installed.
    """
    try:
        from torch.utils import tensorboard
    except ImportError as exc:  # torch imports the tensorboard package lazily here
        raise ImportError(
            "TensorBoard logging needs the 'tensorboard' package (pip install tensorboard)"
        ) from exc
    return tensorboard.SummaryWriter(str(path))


def _scalar(value: Any) -> float | None:
    """``value`` as a float when TensorBoard can plot it (numbers, 0-d tensors), else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        try:
            return float(item())
        except (TypeError, ValueError):
            return None
    return None


class TensorboardFiles:
    """One process's TensorBoard folder and what goes from it into checkpoints.

    Built by ``core.init()`` and held by ``core_context.train``; the PyTorch harness switches it
    with ``context.set_enable_tensorboard_logging()``.

    Arguments:
        mode (TensorboardMode): ``AUTO`` or ``MANUAL``.
        trial_id (int), rank (int): name the folder (``default_tensorboard_path``).
        auto_write (bool): whether ``AUTO`` mode writes metrics and stores the folder (True on
            the cluster, False locally, as Determined's local mode writes nothing).
    """

    def __init__(
        self, *, mode: TensorboardMode, trial_id: int, rank: int, auto_write: bool
    ) -> None:
        self.mode = TensorboardMode(mode)
        self._trial_id = trial_id
        self._rank = rank
        # Determined's ``enable_tensorboard_logging``: only consulted in AUTO mode.
        self.enabled = self.mode is TensorboardMode.AUTO and auto_write
        self._path: pathlib.Path | None = None
        self._uploaded: pathlib.Path | None = None  # MANUAL mode: files chosen for storage
        self._writer: ScalarEventFile | None = None  # made by the writer thread
        self._flushers: list[Callable[[], None]] = []
        self._warned_missing = False
        # Events are written by a thread (``_tb_event_file``): building and framing a record
        # costs ~5 us a step, too much for a report call that otherwise only queues.
        self._events: queue.Queue[list[tuple[str, float, int]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._hurry = threading.Event()  # set by drain() / close(): write now
        self._last_write = -math.inf

    @property
    def path(self) -> pathlib.Path:
        """The folder (created on first use)."""
        if self._path is None:
            self._path = default_tensorboard_path(self._trial_id, self._rank)
        return self._path

    @property
    def _writes_metrics(self) -> bool:
        return self.enabled and self.mode is TensorboardMode.AUTO

    def add_flusher(self, flush: Callable[[], None]) -> None:
        """Call ``flush()`` before the folder is copied into a checkpoint (a user's writer)."""
        self._flushers.append(flush)

    def write_metrics(
        self,
        group: str,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Write the scalar metrics of a training or validation report (when enabled).

        As Determined's ``BatchMetricWriter``: tags are ``Headway/<name>``; per-batch metrics
        are written at their own batch (``steps_completed - len(batch_metrics) + i``) and the
        averages only for names not in them; validation names not starting with ``val`` get a
        ``val_`` prefix. Non-scalar values are skipped. Other groups are not written. Called at
        report time only, so the cost is one event per metric per report, not per batch.
        """
        if not self._writes_metrics or group not in ("training", "validation"):
            return
        events: list[tuple[str, float, int]] = []
        seen: set[str] = set()
        if batch_metrics:
            first = steps_completed - len(batch_metrics)
            for index, batch in enumerate(batch_metrics):
                for name, value in batch.items():
                    _add(events, name, value, first + index)
                    seen.add(name)
        for name, value in metrics.items():
            if name in seen:
                continue
            if group == "validation" and not name.startswith("val"):
                name = "val_" + name
            _add(events, name, value, steps_completed)
        if events:
            self._start_thread()
            self._events.put(events)

    def drain(self) -> None:
        """Block until every metric handed to ``write_metrics`` is written and flushed."""
        if self._thread is not None:
            self._hurry.set()
            self._events.join()

    def _start_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._write_loop, name="headway-tensorboard", daemon=True
                )
                self._thread.start()
                # Daemon threads die at exit: write what is queued first (atexit runs before).
                atexit.register(self.close)

    def _write_loop(self) -> None:
        while True:
            batch = [self._events.get()]  # blocks: the thread never spins
            # One write per WRITE_INTERVAL_S at most (drain() and close() cut the wait short):
            # with a report every few milliseconds, waking up, building events and flushing
            # for each one cost the training loop ~10 us a batch on a 2-core machine.
            wait = self._last_write + WRITE_INTERVAL_S - time.monotonic()
            if batch[0] is not None and wait > 0:
                self._hurry.wait(wait)
            self._hurry.clear()
            while batch[-1] is not None:
                try:
                    batch.append(self._events.get_nowait())
                except queue.Empty:
                    break
            try:
                if any(batch):
                    writer = self._metric_writer()
                    if writer is not None:
                        for events in batch:
                            # A report's events come step by step: one event file record each.
                            for step, scalars in itertools.groupby(events or (), itemgetter(2)):
                                writer.add_scalars(step, ((t, v) for t, v, _ in scalars))
                        writer.flush()
            except Exception:  # a broken writer must not kill the thread (drain() would hang)
                logger.exception("while writing metrics to TensorBoard")
            finally:
                self._last_write = time.monotonic()
                for _ in batch:
                    self._events.task_done()
            if batch[-1] is None:
                return

    def _metric_writer(self) -> ScalarEventFile | None:
        if self._writer is None and not self._warned_missing:
            try:
                from headway.core._tb_event_file import ScalarEventFile

                self._writer = ScalarEventFile(self.path)
            except ImportError as exc:
                self._warned_missing = True
                logger.warning("metrics are not written to TensorBoard: %s", exc)
        return self._writer

    def upload(
        self,
        selector: Callable[[pathlib.Path], bool],
        mangler: Callable[[pathlib.Path, int], pathlib.Path],
    ) -> int:
        """MANUAL mode: choose files of the folder to store (``train.upload_tensorboard_files``).

        Copies every file ``f`` under ``path`` with ``selector(f)`` true (``f`` absolute) to
        ``mangler(relative path, rank)`` in a staging folder, now; the staging folder is stored
        with every checkpoint the chief saves from then on. Returns the number of files copied.

        Raises:
            ValueError: when ``mangler`` returns an absolute path or one leaving the folder.
        """
        if self._uploaded is None:
            self._uploaded = pathlib.Path(
                tempfile.mkdtemp(prefix=f"headway-tensorboard-upload-rank{self._rank}-")
            )
        copied = 0
        root = self.path
        for file in sorted(root.rglob("*")):
            if not file.is_file() or file.is_symlink() or not selector(file):
                continue
            relative = pathlib.Path(mangler(file.relative_to(root), self._rank))
            if relative.is_absolute() or ".." in relative.parts:
                raise ValueError(
                    f"upload_tensorboard_files(): mangler returned {str(relative)!r}; it must "
                    "return a relative path inside the TensorBoard folder"
                )
            dest = self._uploaded / relative
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, dest)
            copied += 1
        return copied

    def write_into_checkpoint(self, checkpoint: pathlib.Path) -> None:
        """Checkpoint file writer (chief): copy the stored files into ``checkpoint/tensorboard/``.

        ``AUTO`` and enabled: the whole folder (after flushing the writers). ``MANUAL``: the
        files passed to ``upload()`` so far. Otherwise nothing.
        """
        if self.mode is TensorboardMode.MANUAL:
            source = self._uploaded
        elif self._writes_metrics:
            self.drain()
            for flush in self._flushers:
                flush()
            source = self._path
        else:
            return
        if source is None or not source.is_dir() or not any(source.iterdir()):
            return
        shutil.copytree(source, checkpoint / TENSORBOARD_DIR, dirs_exist_ok=True)

    def close(self) -> None:
        """Write what is queued, stop the writer thread and close its event file."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        atexit.unregister(self.close)
        self._events.put(None)
        self._hurry.set()
        thread.join()
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _add(events: list[tuple[str, float, int]], name: str, value: Any, step: int) -> None:
    scalar = _scalar(value)
    if scalar is not None and not math.isnan(scalar):
        events.append((TAG_PREFIX + name, scalar, step))
