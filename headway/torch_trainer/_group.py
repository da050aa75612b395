"""One launch of a ``TorchTrainer``'s workers, and the commands the driver sends them.

``WorkerGroup`` is the seam between the driver and what starts the workers: it sends commands and
collects answers through the driver's store, while a subclass starts the workers from a driver
thread and returns once they all ended. ``ElasticWorkerGroup`` (here) starts processes on this
host; ``_ray_group.RayWorkerGroup`` starts Ray actors. Both run ``_worker.worker_main``.

``torch.distributed.launcher.api.elastic_launch`` (torchrun's engine) starts ``num_workers``
processes running ``_worker.worker_main``, sets their ranks, watches them, and when one fails
stops the others and raises ``ChildFailedError``. It runs with ``max_restarts=0``: the driver
decides whether to launch a new group (``TorchTrainer``'s ``max_retries`` is per ``train()``
call), and every launch gets a fresh agent, rendezvous and store namespace.

When the launch ends for any reason the launch thread answers "group died" for every result the
driver still waits for, so the driver blocks in ``TCPStore.wait`` and never polls.
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import logging
import multiprocessing
import os
import signal
import threading
import uuid
from typing import Any

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from headway.launch.wrap_rank import RANK_PREFIX
from headway.torch_trainer import _transport as transport
from headway.torch_trainer._worker import WorkerSpec, worker_main

logger = logging.getLogger("headway.torch_trainer")

_DIED = "died"
_TIMEOUT = datetime.timedelta(seconds=60)
# At interpreter exit: how long idle workers get to obey "shutdown", then each signal.
EXIT_GRACE_S = 10.0
START_METHOD = "forkserver"
# Workers fork from a server process that imported torch and this package once, so starting (or
# restarting) a group costs a fork, not a Python start-up and a torch import per worker.
_PRELOAD = ["torch", "headway.torch_trainer._worker"]


class _NoSignalHandlerWarning(logging.Filter):
    """Drops torchelastic's warning that it cannot install signal handlers outside the main
    thread ("could lead to orphaned worker processes"): our workers block on the driver's
    store and exit with an error as soon as the driver process is gone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Failed to register signal handlers" not in record.getMessage()


logging.getLogger("torch.distributed.elastic.multiprocessing.api").addFilter(
    _NoSignalHandlerWarning()
)


class GroupDied(Exception):
    """The group ended (a worker died or was killed) before every worker answered."""


class WorkerError(Exception):
    """A worker's code raised: ``args[0]`` is its rank, ``args[1]`` its formatted traceback."""


class WorkerGroup(abc.ABC):
    """``num_workers`` workers running ``worker_main(spec)`` and the commands sent to them.

    A subclass implements ``_run_workers()`` (start the workers; return or raise once they all
    ended; runs in a driver thread) and ``_terminate(sig)`` (end the workers now), and calls
    ``_start()`` last in its ``__init__``.

    Arguments:
        store: the driver's TCPStore (master); used by the calling thread only.
        spec: the launch's ``WorkerSpec`` (its ``generation`` names this group's keys).
        num_workers: workers to start (``size``, the process group's world size).
    """

    def __init__(self, store: dist.TCPStore, spec: WorkerSpec, num_workers: int) -> None:
        self._store = store
        self._spec = spec
        self._size = num_workers
        self._seq = 0
        self._lock = threading.Lock()
        self._ended = False
        self._busy = True  # a command (or the start-up's "ready") is unanswered
        self.failure: BaseException | None = None
        self.pids: list[int] = []
        self._thread = threading.Thread(
            target=self._launch, name="torch-trainer-launch", daemon=True
        )

    @property
    def size(self) -> int:
        """The number of workers (the process group's world size)."""
        return self._size

    def _start(self) -> None:
        self._thread.start()

    @abc.abstractmethod
    def _run_workers(self) -> None:
        """Start the workers; return or raise once they all ended (a driver thread runs it)."""

    @abc.abstractmethod
    def _terminate(self, sig: signal.Signals) -> None:
        """End the workers now with ``sig``."""

    def _launch(self) -> None:
        try:
            self._run_workers()
        except BaseException as exc:  # a worker failed, or the launch itself failed
            self.failure = exc
        finally:
            self._on_end()

    def _on_end(self) -> None:
        # A client of its own: the driver thread may be blocked inside the master's wait().
        store = dist.TCPStore(
            self._spec.store_host, self._spec.store_port, is_master=False, timeout=_TIMEOUT
        )
        with self._lock:
            self._ended = True
            seq = self._seq
        for rank in range(self._size):
            key = transport.result_key(self._spec.generation, seq, rank)
            if not store.check([key]):
                transport.put(store, self._spec.secret, key, (_DIED, None))

    @property
    def alive(self) -> bool:
        """False once the launch ended (the workers exited)."""
        with self._lock:
            return not self._ended

    def wait_ready(self) -> None:
        """Wait until every worker has set up (and loaded the state it was given).

        Raises:
            WorkerError: a worker's set-up raised.
            GroupDied: the group ended first.
        """
        self.pids = self._collect(0)
        with self._lock:
            self._busy = False

    def run(self, op: str, **kwargs: Any) -> list[Any]:
        """Run command ``op`` on every worker; returns their results by rank.

        Raises:
            WorkerError: a worker raised (the group then ends: the worker exits non-zero).
            GroupDied: the group ended before every worker answered.
        """
        with self._lock:
            if self._ended:
                raise GroupDied("the worker group has ended")
            self._seq += 1
            seq = self._seq
            self._busy = True
        transport.put(
            self._store,
            self._spec.secret,
            transport.command_key(self._spec.generation, seq),
            (op, kwargs),
        )
        results = self._collect(seq)
        with self._lock:
            self._busy = False
        return results

    def _collect(self, seq: int) -> list[Any]:
        generation, secret = self._spec.generation, self._spec.secret
        keys = [transport.result_key(generation, seq, rank) for rank in range(self._size)]
        transport.wait(self._store, keys)
        answers = [transport.get(self._store, secret, key) for key in keys]
        for key in keys:
            transport.delete(self._store, key)
        if seq:
            transport.delete(self._store, transport.command_key(generation, seq))
        # A bug raised by user code is the cause, not retried; a worker that vanished (killed,
        # out of memory) or errors that only say a peer is gone mean the group died.
        for rank, (status, value) in enumerate(answers):
            if status == "error" and not value[1]:
                raise WorkerError(rank, value[0])
        for rank, (status, _value) in enumerate(answers):
            if status == _DIED:
                raise GroupDied(f"worker {rank} ended without answering ({self.failure!r})")
        for rank, (status, value) in enumerate(answers):
            if status == "error":
                raise GroupDied(f"worker {rank} lost a peer:\n{value[0]}")
        return [value for _, value in answers]

    def join(self, timeout: float = 120.0) -> None:
        """Wait for the launch to end (after a failure the agent is stopping the workers)."""
        self._thread.join(timeout)

    def end_at_exit(self, grace: float = EXIT_GRACE_S) -> None:
        """End the workers without waiting on them beyond ``grace`` seconds per step (at
        interpreter exit, when the driver never called ``shutdown()``).

        Idle workers are sent "shutdown" (not awaited); workers still running after ``grace``
        seconds (a command was in flight: the driver was interrupted inside a call) get
        SIGTERM, then SIGKILL (``_terminate``); the launch then ends.
        """
        with self._lock:
            idle = not self._ended and not self._busy
            if idle:
                self._seq += 1
                seq = self._seq
        if idle:
            with contextlib.suppress(Exception):  # the store is ours: only a dying group fails
                transport.put(
                    self._store,
                    self._spec.secret,
                    transport.command_key(self._spec.generation, seq),
                    ("shutdown", {}),
                )
        self._thread.join(grace)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self._thread.is_alive():
                return
            logger.warning("TorchTrainer: workers still running at exit; sending %s", sig.name)
            self._terminate(sig)
            self._thread.join(grace)

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the workers to exit and wait for the launch to end (at most ``timeout`` s)."""
        if self.alive:
            with contextlib.suppress(GroupDied, WorkerError):
                self.run("shutdown")
        self._thread.join(timeout)


class ElasticWorkerGroup(WorkerGroup):
    """``num_workers`` processes on this host started by one ``elastic_launch``.

    Arguments:
        store, spec, num_workers: as ``WorkerGroup``.
        log_dir: where the agent keeps each worker's output (teed to this process's, with
            Headway's ``[rank=N] || `` prefix) and error files.
    """

    def __init__(
        self, store: dist.TCPStore, spec: WorkerSpec, num_workers: int, log_dir: str
    ) -> None:
        super().__init__(store, spec, num_workers)
        self._config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=num_workers,
            run_id=f"headway-torch-trainer-{uuid.uuid4().hex}",
            rdzv_backend="c10d",
            rdzv_endpoint="127.0.0.1:0",  # a free port, as torchrun --standalone
            max_restarts=0,
            start_method=START_METHOD,
            local_addr="127.0.0.1",
            log_line_prefix_template=RANK_PREFIX,
            logs_specs=DefaultLogsSpecs(log_dir=log_dir, tee=Std.ALL),
        )
        # Process-wide, but only set once a trainer starts workers (not at import).
        multiprocessing.set_forkserver_preload(_PRELOAD)
        self._start()

    def _run_workers(self) -> None:
        # ChildFailedError when a worker failed (the agent stopped the others first).
        elastic_launch(self._config, worker_main)(self._spec)

    def _terminate(self, sig: signal.Signals) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
