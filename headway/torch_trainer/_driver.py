"""The driver side of a ``TorchTrainer``: its store, its worker groups and the last good state.

``Driver`` owns the TCPStore the workers talk through, a temporary directory of state files, and
the current ``WorkerGroup``, which its *launcher* starts: ``ElasticLauncher`` (processes on this
host, always ``num_workers``) or ``_ray_group.RayLauncher`` (Ray actors, as many as fit). ``run()`` sends one command to every worker; when the group dies it
starts a new one (a new ``elastic_launch``) that loads the *last good state* and runs the command
again, as many times as the caller allows. After each ``train()`` (and ``snapshot()`` /
``load()``) the file rank 0 wrote becomes the last good state, once every worker answered.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch.distributed as dist

from headway.torch_trainer import _args
from headway.torch_trainer import _transport as transport
from headway.torch_trainer._group import ElasticWorkerGroup, GroupDied, WorkerError, WorkerGroup
from headway.torch_trainer._worker import WorkerSpec

logger = logging.getLogger("headway.torch_trainer")


class Launcher(Protocol):
    """Starts one ``WorkerGroup``; the seam between the driver and where workers run."""

    # The address workers reach the driver's store at.
    store_host: str
    # Whether state files must travel through the store (workers on other hosts).
    ship_state: bool

    def __call__(
        self, store: dist.TCPStore, spec_for: Callable[[int], WorkerSpec], log_dir: str
    ) -> WorkerGroup:
        """Start a group; ``spec_for(size)`` gives the spec of a group of ``size`` workers."""
        ...

    def can_grow(self, size: int) -> bool:
        """Whether a group larger than ``size`` workers (up to ``num_workers``) would fit now."""
        ...


class ElasticLauncher:
    """``num_workers`` processes on this host (``ElasticWorkerGroup``), never resized."""

    store_host = "127.0.0.1"
    ship_state = False

    def __init__(self, num_workers: int) -> None:
        self.num_workers = num_workers

    def __call__(
        self, store: dist.TCPStore, spec_for: Callable[[int], WorkerSpec], log_dir: str
    ) -> WorkerGroup:
        spec = spec_for(self.num_workers)
        return ElasticWorkerGroup(store, spec, self.num_workers, log_dir)

    def can_grow(self, size: int) -> bool:
        return False


class Driver:
    """Starts the workers with ``spec`` fields, takes the initial state snapshot.

    Arguments:
        num_workers: the workers wanted per group.
        launcher: starts each group (``ElasticLauncher`` when None).
        config: the trainer's config; each group's workers get ``BATCH_SIZE`` divided by the
            group's size.
        **spec: the ``WorkerSpec`` fields other than the store's, the generation's and config.

    Raises:
        RuntimeError: the workers failed to start (with the failing worker's traceback).
    """

    def __init__(
        self,
        num_workers: int,
        launcher: Launcher | None = None,
        config: dict[str, Any] | None = None,
        **spec: Any,
    ) -> None:
        self.num_workers = num_workers
        self.num_failures = 0
        self._launcher = launcher if launcher is not None else ElasticLauncher(num_workers)
        self._config = dict(config or {})
        self._state_dir = Path(tempfile.mkdtemp(prefix="headway-torch-trainer-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._state_dir, True)
        # The server listens on every interface; workers on other nodes use store_host.
        self._store = dist.TCPStore(
            self._launcher.store_host, 0, is_master=True, wait_for_workers=False
        )
        self.spec = WorkerSpec(
            store_host=self._launcher.store_host,
            store_port=self._store.port,
            secret=secrets.token_bytes(32),
            generation=0,
            state_path=None,
            config=_args.split_batch_size(dict(self._config), num_workers),
            ship_state=self._launcher.ship_state,
            **spec,
        )
        self._group: WorkerGroup | None = None
        self._state_path: str | None = None  # the last good state (a file in _state_dir)
        self._files = 0
        self._closed = False
        try:
            self._start_group()
            # The initial state, so a group restarted during the first train() starts from
            # the same weights the others had.
            self.snapshot()
        except (GroupDied, WorkerError, RuntimeError) as exc:
            self.close()
            raise RuntimeError(f"TorchTrainer: the workers failed to start: {_why(exc)}") from exc

    @property
    def size(self) -> int:
        """The current group's number of workers (``num_workers`` when none runs)."""
        return self._group.size if self._group is not None else self.num_workers

    @property
    def pids(self) -> list[int]:
        return list(self._group.pids) if self._group is not None else []

    def new_path(self) -> str:
        """A new state file name in the driver's directory."""
        self._files += 1
        return str(self._state_dir / f"state-{self._files}.pt")

    def _send(self, path: str) -> None:
        if self.spec.ship_state:
            with open(path, "rb") as file:
                data = file.read()
            transport.put(self._store, self.spec.secret, transport.state_key(path), data)

    def _unsend(self, path: str | None) -> None:
        if self.spec.ship_state and path is not None:
            transport.delete(self._store, transport.state_key(path))

    def promote(self, path: str) -> None:
        """``path`` (written by rank 0) is now the last good state; drop the previous one."""
        if self.spec.ship_state:  # rank 0 sent the bytes, not a file on this host
            key = transport.state_key(path)
            data = transport.get(self._store, self.spec.secret, key)
            with open(path, "wb") as file:
                file.write(data)
            transport.delete(self._store, key)
        old, self._state_path = self._state_path, path
        if old is not None and old != path and os.path.exists(old):
            os.remove(old)

    def snapshot(self) -> str:
        """Have rank 0 write the current state; it becomes the last good state (its path)."""
        path = self.new_path()
        self.run("save", path=path)
        self.promote(path)
        return path

    def load(self, path: str) -> None:
        """Load the state file ``path`` into every worker; it becomes the last good state."""
        self._send(path)
        try:
            self.run("load", path=path)
        finally:
            self._unsend(path)
        old, self._state_path = self._state_path, path
        if old is not None and old != path and os.path.exists(old):
            os.remove(old)

    def _start_group(self) -> None:
        if self._group is not None:  # ended while the driver was idle
            self._end_group()
        generation = self.spec.generation + 1  # a fresh key namespace per launch

        def spec_for(size: int) -> WorkerSpec:
            if size != self.num_workers:
                logger.warning(
                    "TorchTrainer: starting %d of %d workers (what fits now)",
                    size,
                    self.num_workers,
                )
            self.spec = dataclasses.replace(
                self.spec,
                generation=generation,
                state_path=self._state_path,
                config=_args.split_batch_size(dict(self._config), size),
            )
            return self.spec

        log_dir = self._state_dir / "logs" / str(generation)
        state_path = self._state_path
        if state_path is not None:
            self._send(state_path)
        try:
            self._group = self._launcher(self._store, spec_for, str(log_dir))
            self._group.wait_ready()
        finally:
            self._unsend(state_path)

    def grow(self) -> bool:
        """When the current group has fewer than ``num_workers`` workers and a larger one fits,
        snapshot the state and start a larger group from it; returns whether it did."""
        if self._group is None or not self._group.alive:
            return False
        if self._group.size >= self.num_workers or not self._launcher.can_grow(self._group.size):
            return False
        self.snapshot()
        group, self._group = self._group, None
        group.stop()
        self._start_group()
        return True

    def _end_group(self) -> None:
        group, self._group = self._group, None
        if group is not None:
            group.join()

    def run(self, op: str, retries: int = 0, **kwargs: Any) -> list[Any]:
        """Run ``op`` on every worker, starting a new group first when the last one ended;
        after a group failure, start a new group from the last good state and run ``op``
        again, at most ``retries`` times. Returns the workers' results by rank.

        Raises:
            RuntimeError: a worker raised (never retried), or the group failed once more than
                ``retries`` allows, or the trainer was shut down.
        """
        if self._closed:
            raise RuntimeError("this TorchTrainer was shut down")
        failures = 0
        while True:
            try:
                if self._group is None or not self._group.alive:
                    self._start_group()
                assert self._group is not None
                return self._group.run(op, **kwargs)
            except WorkerError as exc:
                self._end_group()  # the raising worker exits: the agent stops the others
                raise RuntimeError(f"TorchTrainer.{op}: {_why(exc)}") from exc
            except GroupDied as exc:
                self._end_group()
                self.num_failures += 1
                failures += 1
                if self._closed:  # ended by close_at_exit() from the exiting main thread
                    raise RuntimeError(f"TorchTrainer.{op}: the trainer was shut down") from exc
                if failures > retries:
                    raise RuntimeError(
                        f"TorchTrainer.{op}: the worker group failed and max_retries={retries} "
                        f"restarts are used up: {exc}"
                    ) from exc
                logger.warning(
                    "TorchTrainer.%s: the worker group failed (%s); restarting it from the "
                    "last good state (retry %d of %d)",
                    op,
                    exc,
                    failures,
                    retries,
                )

    def close(self) -> None:
        """Stop the workers and delete the state files (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.stop()
            self._group = None
        self._finalizer()

    def close_at_exit(self) -> None:
        """``close()`` at interpreter exit: bounded, so the driver always exits (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._group is not None:
            self._group.end_at_exit()
            self._group = None
        self._finalizer()


def _why(exc: BaseException) -> str:
    if isinstance(exc, WorkerError):
        rank, tb = exc.args
        return f"worker {rank} raised:\n{tb}"
    return str(exc)
