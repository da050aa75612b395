"""``DistributedContext``: ranks and object collectives used to coordinate Core API calls.

Same names and semantics as Determined's ``core.DistributedContext``. Its collectives do not
need ``torch.distributed.init_process_group()`` (Determined's run over its own ZMQ sockets): when
a process group exists at the first collective they use ``torch.distributed`` object
collectives on a gloo group (CPU, so control messages never touch the GPU); otherwise they use
torchrun's key-value store, or, in processes no launcher started, a store of their own that
rank 0 serves (``headway.core._store_collectives``). The choice is made once, at the first
collective, so every rank keeps using the same transport.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from headway.core._store_collectives import StoreCollectives, agent_store_available

if TYPE_CHECKING:
    from headway._info import ClusterInfo

logger = logging.getLogger("headway.core")


class DistributedContext:
    """Where this process sits among the workers of a trial, plus collectives over them.

    Ranks on one node must be contiguous (``rank == cross_rank * local_size + local_rank``), as
    ``torchrun`` assigns them. With ``size == 1`` every collective is trivial and torch is never
    imported. With ``size > 1`` every rank must call each collective in the same order; the
    processes may have been started by ``torchrun`` (``headway.launch.torch_distributed``), or
    have called ``torch.distributed.init_process_group()`` before the first collective, or be
    started by the script itself (a custom launcher, as Determined's ``core_api/4_distributed.py``):
    then rank 0 serves a ``torch.distributed`` store for the others (see ``port``).

    Arguments:
        rank (int): global rank, ``0 <= rank < size``; rank 0 is the chief.
        size (int): number of workers.
        local_rank (int), local_size (int): rank and count of workers on this node.
        cross_rank (int), cross_size (int): index of this node and number of nodes.
        chief_ip (str | None): address of the chief's node: where the other ranks reach the
            store rank 0 serves when no launcher started the processes (required then when
            ``cross_size > 1``; default ``127.0.0.1``).
        port (int | None): Headway extension: the TCP port of that store. Default: on the
            cluster a file in the run's directory (one host) or the port the worker reserved
            for the run (several hosts); outside it Determined's default port, 12360 (two such
            jobs on one machine at once need different ports).

    Raises:
        ValueError: when the ranks are inconsistent (naming the field).
    """

    def __init__(
        self,
        *,
        rank: int,
        size: int,
        local_rank: int,
        local_size: int,
        cross_rank: int,
        cross_size: int,
        chief_ip: str | None = None,
        port: int | None = None,
    ) -> None:
        for name, value, bound in (
            ("rank", rank, size),
            ("local_rank", local_rank, local_size),
            ("cross_rank", cross_rank, cross_size),
        ):
            if not 0 <= int(value) < int(bound):
                raise ValueError(f"DistributedContext: {name}={value} is not in [0, {bound})")
        if local_size * cross_size != size:
            raise ValueError(
                f"DistributedContext: local_size * cross_size ({local_size} * {cross_size}) "
                f"must equal size ({size})"
            )
        self._rank = int(rank)
        self._size = int(size)
        self._local_rank = int(local_rank)
        self._local_size = int(local_size)
        self._cross_rank = int(cross_rank)
        self._cross_size = int(cross_size)
        self._chief_ip = chief_ip
        if port is not None and (isinstance(port, bool) or not 0 < int(port) < 65536):
            raise ValueError(f"DistributedContext: port={port!r} is not a TCP port")
        self._port = None if port is None else int(port)
        self._group: Any = None  # gloo group for the whole job, created on first use
        self._local_group: Any = None
        self._store: StoreCollectives | None = None  # or torchrun's store, chosen on first use
        self._transport: str | None = None  # "torch" or "store" once chosen

    def __repr__(self) -> str:
        return (
            f"DistributedContext(rank={self._rank}, size={self._size}, "
            f"local_rank={self._local_rank}, local_size={self._local_size}, "
            f"cross_rank={self._cross_rank}, cross_size={self._cross_size})"
        )

    @classmethod
    def single(cls) -> DistributedContext:
        """A one-worker context (what ``core.init()`` uses when none is given)."""
        return cls(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)

    @classmethod
    def from_torch_distributed(cls, chief_ip: str | None = None) -> DistributedContext:
        """Build from the env vars ``torchrun`` sets.

        Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``GROUP_RANK``
        (the node index); ``cross_size = WORLD_SIZE // LOCAL_WORLD_SIZE``. ``chief_ip`` defaults
        to ``$HEADWAY_CHIEF_IP`` or ``$MASTER_ADDR``.

        Raises:
            RuntimeError: naming the missing or non-integer variable.
        """
        values = {}
        for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
            raw = os.environ.get(var)
            if raw is None:
                raise RuntimeError(
                    f"DistributedContext.from_torch_distributed(): ${var} is not set; launch "
                    "with torchrun"
                )
            try:
                values[var] = int(raw)
            except ValueError as exc:
                raise RuntimeError(f"${var}={raw!r} is not an integer") from exc
        return cls(
            rank=values["RANK"],
            size=values["WORLD_SIZE"],
            local_rank=values["LOCAL_RANK"],
            local_size=values["LOCAL_WORLD_SIZE"],
            cross_rank=values["GROUP_RANK"],
            cross_size=values["WORLD_SIZE"] // values["LOCAL_WORLD_SIZE"],
            chief_ip=chief_ip
            or os.environ.get("HEADWAY_CHIEF_IP")
            or os.environ.get("MASTER_ADDR"),
        )

    @classmethod
    def from_launcher(cls) -> DistributedContext | None:
        """``from_torch_distributed()`` when this process is one of several ranks started by a
        launcher (``$WORLD_SIZE`` > 1: ``torchrun``, ``headway.launch.torch_distributed``);
        None otherwise. What ``core.init()`` and ``pytorch.init()`` use when given no
        ``distributed`` (Determined's ``pytorch.init()`` does the same on the cluster).

        Raises:
            RuntimeError: naming the launcher variable that is missing or not an integer.
        """
        raw = os.environ.get("WORLD_SIZE", "").strip()
        if not raw:
            return None
        try:
            size = int(raw)
        except ValueError as exc:
            raise RuntimeError(f"$WORLD_SIZE={raw!r} is not an integer") from exc
        return cls.from_torch_distributed() if size > 1 else None

    # -- ranks ---------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Global rank (0 is the chief)."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of workers."""
        return self._size

    @property
    def local_rank(self) -> int:
        """Rank on this node (0 is the local chief)."""
        return self._local_rank

    @property
    def local_size(self) -> int:
        """Workers on this node."""
        return self._local_size

    @property
    def cross_rank(self) -> int:
        """Index of this node."""
        return self._cross_rank

    @property
    def cross_size(self) -> int:
        """Number of nodes."""
        return self._cross_size

    def get_rank(self) -> int:
        """Global rank (0 is the chief)."""
        return self._rank

    def get_size(self) -> int:
        """Number of workers."""
        return self._size

    def get_local_rank(self) -> int:
        """Rank on this node."""
        return self._local_rank

    def get_local_size(self) -> int:
        """Workers on this node."""
        return self._local_size

    def get_cross_rank(self) -> int:
        """Index of this node."""
        return self._cross_rank

    def get_cross_size(self) -> int:
        """Number of nodes."""
        return self._cross_size

    @property
    def chief_ip(self) -> str | None:
        """Address of the chief's node, when known."""
        return self._chief_ip

    # -- collectives ---------------------------------------------------------------------------

    def broadcast(self, stuff: Any) -> Any:
        """Return the chief's ``stuff`` on every rank (picklable objects)."""
        if self._size == 1:
            return stuff
        if self._uses_store():
            return self._store_collectives().broadcast("all", self._rank, self._size, stuff)
        dist, group = self._torch_group(local=False)
        box = [stuff if self._rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=group)
        return box[0]

    def broadcast_local(self, stuff: Any = None) -> Any:
        """Return the local chief's ``stuff`` on every rank of this node."""
        if self._local_size == 1:
            return stuff
        if self._uses_store():
            return self._store_collectives().broadcast(
                self._node_group, self._local_rank, self._local_size, stuff
            )
        dist, group = self._torch_group(local=True)
        box = [stuff if self._local_rank == 0 else None]
        dist.broadcast_object_list(box, src=self._local_chief_rank(), group=group)
        return box[0]

    def gather(self, stuff: Any) -> list[Any] | None:
        """Return every rank's ``stuff`` (in rank order) on the chief, None elsewhere."""
        if self._size == 1:
            return [stuff]
        if self._uses_store():
            return self._store_collectives().gather("all", self._rank, self._size, stuff)
        dist, group = self._torch_group(local=False)
        out: list[Any] | None = [None] * self._size if self._rank == 0 else None
        dist.gather_object(stuff, out, dst=0, group=group)
        return out

    def gather_local(self, stuff: Any) -> list[Any] | None:
        """Return every local rank's ``stuff`` on the local chief, None elsewhere."""
        if self._local_size == 1:
            return [stuff]
        if self._uses_store():
            return self._store_collectives().gather(
                self._node_group, self._local_rank, self._local_size, stuff
            )
        dist, group = self._torch_group(local=True)
        out: list[Any] | None = [None] * self._local_size if self._local_rank == 0 else None
        dist.gather_object(stuff, out, dst=self._local_chief_rank(), group=group)
        return out

    def allgather(self, stuff: Any) -> list[Any]:
        """Return every rank's ``stuff`` (in rank order) on every rank."""
        if self._size == 1:
            return [stuff]
        if self._uses_store():
            return self._store_collectives().allgather("all", self._rank, self._size, stuff)
        dist, group = self._torch_group(local=False)
        out: list[Any] = [None] * self._size
        dist.all_gather_object(out, stuff, group=group)
        return out

    def allgather_local(self, stuff: Any) -> list[Any]:
        """Return every local rank's ``stuff`` on every rank of this node."""
        if self._local_size == 1:
            return [stuff]
        if self._uses_store():
            return self._store_collectives().allgather(
                self._node_group, self._local_rank, self._local_size, stuff
            )
        dist, group = self._torch_group(local=True)
        out: list[Any] = [None] * self._local_size
        dist.all_gather_object(out, stuff, group=group)
        return out

    def barrier(self) -> None:
        """Block until every rank got here."""
        self.allgather(None)

    def close(self) -> None:
        """Release the process groups or store connection this context created (the default
        group is left alone). A later collective chooses its transport again."""
        self._group = None
        self._local_group = None
        if self._store is not None:
            self._store.leave()
        self._store = None
        self._transport = None

    def _local_chief_rank(self) -> int:
        return self._cross_rank * self._local_size

    @property
    def _node_group(self) -> str:
        return f"node{self._cross_rank}"

    def _uses_store(self) -> bool:
        """Choose the transport at the first collective: a process group when one exists."""
        if self._transport is None:
            import torch.distributed as dist

            initialized = dist.is_available() and dist.is_initialized()
            self._transport = "torch" if initialized else "store"
        return self._transport == "store"

    def _store_collectives(self) -> StoreCollectives:
        if self._store is None:
            if agent_store_available():
                self._store = StoreCollectives.from_agent_store()
            else:
                self._store = StoreCollectives.for_ranks(
                    rank=self._rank,
                    size=self._size,
                    cross_size=self._cross_size,
                    chief_ip=self._chief_ip,
                    port=self._port,
                )
        return self._store

    def _torch_group(self, *, local: bool) -> tuple[Any, Any]:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"DistributedContext with size={self._size}: torch.distributed's default "
                "process group was destroyed after this context started using it"
            )
        if self._group is None:
            # new_group() is itself a collective: every rank reaches this point on its first
            # collective, so creating groups lazily keeps all ranks in step.
            if dist.get_backend() == "gloo":
                self._group = dist.group.WORLD
            else:
                self._group = dist.new_group(backend="gloo")
            if self._cross_size == 1:
                self._local_group = self._group
            else:
                for node in range(self._cross_size):
                    ranks = list(range(node * self._local_size, (node + 1) * self._local_size))
                    group = dist.new_group(ranks=ranks, backend="gloo")
                    if node == self._cross_rank:
                        self._local_group = group
        return dist, (self._local_group if local else self._group)


def default_distributed(
    distributed: DistributedContext | None, info: ClusterInfo | None
) -> DistributedContext:
    """The ``DistributedContext`` ``core.init()`` uses: ``distributed`` when given, else the
    launcher's ranks (``DistributedContext.from_launcher()``), else a single worker.

    Raises:
        ValueError: on the cluster, for a trial holding several slots (on this host or over
            several hosts) whose process was started without a launcher and given no
            ``distributed``: each process would train alone as the chief (Determined's
            ``core.init()`` refuses this case with the same advice).
    """
    if distributed is not None:
        return distributed
    launched = DistributedContext.from_launcher()
    if launched is not None:
        logger.info("joining the launcher's ranks: %r", launched)
        return launched
    if info is not None and (len(info.slot_ids) > 1 or len(info.container_addrs) > 1):
        raise ValueError(
            f"this trial holds {len(info.slot_ids)} slots on {len(info.container_addrs)} "
            "host(s) but the process was not started by a launcher: start the entrypoint with "
            "python -m headway.launch.torch_distributed, or pass "
            "core.init(distributed=core.DistributedContext(...)) from processes your script "
            "starts itself (one per slot)"
        )
    return DistributedContext.single()
