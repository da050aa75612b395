"""Object collectives over a ``torch.distributed.TCPStore``, for when no process group exists.

Determined's ``DistributedContext`` runs its collectives over its own ZMQ sockets, so they work
before (or without) ``torch.distributed.init_process_group()``. Headway uses the key-value store
that ``torchrun`` already serves on the chief host (``MASTER_ADDR:MASTER_PORT``, announced by
``TORCHELASTIC_USE_AGENT_STORE=True``): nothing new listens, and no default process group is
created behind the user's back (a later ``init_process_group("nccl")`` still works).

Protocol, per group (all ranks, or one node's ranks) with a sequence number per call:
``allgather``: every member sets ``<group>/<seq>/<index>`` and waits for all of them; a member
deletes its key of call ``seq - 1`` once call ``seq`` completed (everyone wrote ``seq``, so
everyone finished reading ``seq - 1``). ``broadcast``: the source sets one key; each reader
increments a counter after reading and the last one deletes both. ``gather``: the destination
reads every key and deletes them. Values are pickled (the peers are the same trial's ranks).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

# As long as torch's default process-group timeout: a rank may wait that long for the chief
# (e.g. while it validates or checkpoints) before a collective fails.
DEFAULT_TIMEOUT = timedelta(minutes=30)
_instances = 0  # contexts of this process that use a store: part of their key prefix
# Determined's DistributedContext default port (its ZMQ ``pub_port``), used by a context built
# by hand with a chief_ip and no port outside the cluster.
DEFAULT_PORT = 12360
LEAVE_TIMEOUT = timedelta(minutes=5)  # longest a hosting chief waits at exit for the others

logger = logging.getLogger("headway.core")


def agent_store_available(environ: Any = None) -> bool:
    """Whether torchrun's agent store is announced in the environment of this process."""
    env = os.environ if environ is None else environ
    return (
        env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        and bool(env.get("MASTER_ADDR"))
        and bool(env.get("MASTER_PORT"))
    )


class StoreCollectives:
    """Allgather / broadcast / gather of picklable objects among ``size`` ranks over a store.

    Arguments:
        store: a ``torch.distributed.Store`` every rank reaches (keys are prefixed here).
        prefix (str): namespace of this context's keys (the same on every rank).

    Every member of a group must make the same calls in the same order, as with any collective.
    Each call costs one to two store round trips plus one per member read.
    """

    def __init__(self, store: Any, prefix: str) -> None:
        import torch.distributed as dist

        # Any: torch's stubs type values as str, but the store takes (and returns) bytes.
        self._store: Any = dist.PrefixStore(prefix, store)
        self._seq: dict[str, int] = {}
        self._leave: tuple[int, int] | None = None  # (rank, size) while rank 0 serves it

    @classmethod
    def from_agent_store(cls, timeout: timedelta = DEFAULT_TIMEOUT) -> StoreCollectives:
        """Connect to torchrun's store (``MASTER_ADDR``/``MASTER_PORT``) as a client.

        Raises:
            RuntimeError: when torchrun did not announce its store (not launched by torchrun).
        """
        global _instances
        if not agent_store_available():
            raise RuntimeError(
                "DistributedContext collectives need torch.distributed.init_process_group() "
                "first, or a process started by torchrun / headway.launch.torch_distributed "
                "(TORCHELASTIC_USE_AGENT_STORE=True)"
            )
        import torch.distributed as dist

        store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=timeout,
        )
        _instances += 1
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        return cls(store, f"headway/dc/{restart}/{_instances}/")

    @classmethod
    def for_ranks(
        cls,
        *,
        rank: int,
        size: int,
        cross_size: int,
        chief_ip: str | None,
        port: int | None,
        timeout: timedelta = DEFAULT_TIMEOUT,
    ) -> StoreCollectives:
        """A store of this context's own, for processes no launcher started (a
        ``DistributedContext`` built by hand, Determined's ``core_api/4_distributed.py``).

        Where it lives, first match: ``port`` given: a ``TCPStore`` served by rank 0 on that
        port, reached at ``chief_ip``; on the cluster with one host: a ``FileStore`` in the
        run's directory (next to ``$HEADWAY_CLUSTER_INFO``; fresh for every run); on the
        cluster over several hosts: a ``TCPStore`` on the port the worker reserved for the run
        (``$HEADWAY_RDZV_PORT``, unused when torchrun is not started); else a ``TCPStore`` on
        Determined's default port 12360. Rank 0 serving a ``TCPStore`` waits at exit (at most 5
        minutes) until every other rank has left, so that none loses its store mid-call.

        Raises:
            ValueError: naming ``chief_ip`` when several hosts take part and it is not given.
            RuntimeError: from torch when rank 0 cannot listen on the port (in use).
        """
        global _instances
        import torch.distributed as dist

        _instances += 1
        info = os.environ.get("HEADWAY_CLUSTER_INFO")
        rdzv = os.environ.get("HEADWAY_RDZV_PORT")
        if port is None and cross_size == 1 and info:
            path = Path(info).parent / f"distributed-store-{_instances}"
            return cls(dist.FileStore(str(path), size), "headway/dc/")
        if port is None:
            port = int(rdzv) if info and rdzv else DEFAULT_PORT
        if chief_ip is None:
            if cross_size > 1:
                raise ValueError(
                    "DistributedContext(chief_ip=...) is required when the ranks span several "
                    "hosts (cross_size > 1): the address where rank 0 serves the store"
                )
            chief_ip = "127.0.0.1"
        store = dist.TCPStore(
            chief_ip, int(port), is_master=rank == 0, timeout=timeout, wait_for_workers=False
        )
        collectives = cls(store, f"headway/dc/{_instances}/")
        collectives._leave = (rank, size)
        atexit.register(collectives.leave)
        return collectives

    def leave(self) -> None:
        """Say this rank is done with a store rank 0 serves; rank 0 waits (bounded) for all of
        them, so it never stops serving while another rank still reads. Idempotent."""
        if self._leave is None:
            return
        rank, size = self._leave
        self._leave = None
        atexit.unregister(self.leave)
        try:
            if rank != 0:
                if self._store.add("left", 1) == size - 1:
                    self._store.set("all-left", b"1")
            elif size > 1:
                self._store.wait(["all-left"], LEAVE_TIMEOUT)
        except Exception as exc:  # a peer already gone: nothing left to protect
            logger.warning("DistributedContext store: leaving without every rank: %s", exc)

    def _next(self, group: str) -> int:
        seq = self._seq.get(group, 0)
        self._seq[group] = seq + 1
        return seq

    def allgather(self, group: str, index: int, count: int, stuff: Any) -> list[Any]:
        """Every member's ``stuff`` in member order (``index`` is this rank's, of ``count``)."""
        seq = self._next(group)
        self._store.set(f"{group}/{seq}/{index}", pickle.dumps(stuff))
        keys = [f"{group}/{seq}/{i}" for i in range(count)]
        self._store.wait(keys)
        values = [pickle.loads(raw) for raw in self._store.multi_get(keys)]
        if seq > 0:
            self._store.delete_key(f"{group}/{seq - 1}/{index}")
        return values

    def broadcast(self, group: str, index: int, count: int, stuff: Any, src: int = 0) -> Any:
        """The ``src`` member's ``stuff`` on every member."""
        seq = self._next(group)
        key = f"{group}/{seq}/b"
        if index == src:
            self._store.set(key, pickle.dumps(stuff))
            return stuff
        value = pickle.loads(self._store.get(key))
        if self._store.add(f"{group}/{seq}/n", 1) == count - 1:
            self._store.delete_key(key)  # the last reader cleans up
            self._store.delete_key(f"{group}/{seq}/n")
        return value

    def gather(
        self, group: str, index: int, count: int, stuff: Any, dst: int = 0
    ) -> list[Any] | None:
        """Every member's ``stuff`` on ``dst`` (member order); None on the others."""
        seq = self._next(group)
        key = f"{group}/{seq}/{index}"
        if index != dst:
            self._store.set(key, pickle.dumps(stuff))
            return None
        keys = [f"{group}/{seq}/{i}" for i in range(count) if i != dst]
        values: Sequence[bytes] = []
        if keys:
            self._store.wait(keys)
            values = self._store.multi_get(keys)
            for k in keys:
                self._store.delete_key(k)
        out = [pickle.loads(raw) for raw in values]
        out.insert(dst, stuff)
        return out
