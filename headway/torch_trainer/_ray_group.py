"""``TorchTrainer`` workers as Ray actors: one actor per worker, placed by a placement group.

``RayLauncher`` reserves one bundle per worker (``num_cpus_per_worker`` CPUs, a GPU with
``use_gpu``, ``resources_per_worker``) in a ``SPREAD`` placement group, as many bundles as fit
(``num_workers`` when the cluster has room; fewer after a node was lost, with an exponential
back-off while nothing fits). ``RayWorkerGroup`` starts one ``_WorkerActor`` per bundle; each
runs ``_worker.worker_main`` in its ``run`` method, so commands, answers, the process group's
rendezvous (a ``PrefixStore`` per launch) and the training loop are those of the elastic path:
the workers reach the driver's TCPStore at the driver's node address.

Inside a Ray Tune trial (``TorchTrainer.as_trainable``) the trial's placement group already
holds the workers' bundles (bundle 0 is the trainable's own): the actors go there and the group
is never resized.

An actor that dies (its node lost, its process killed) makes its ``run`` call raise
``RayActorError``; the group then kills its other actors and ends, and the driver starts a new
group from the last good state (``_driver.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import psutil
import ray
import torch.distributed as dist
from ray.util.placement_group import (
    PlacementGroup,
    get_current_placement_group,
    placement_group,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from headway.torch_trainer._group import WorkerGroup
from headway.torch_trainer._worker import WorkerSpec, worker_main

# How long a placement group of the wanted size may stay pending before a smaller one is tried
# (a lost node's resources stay listed until Ray declares it dead), and the back-off bounds
# while no size fits at all.
PLACE_TIMEOUT_S = 10.0
SMALLER_TIMEOUT_S = 2.0
# Before each train() of a shrunk group: how long a probe bundle may take to be placed (a miss
# only delays the grow to a later train()).
GROW_PROBE_S = 1.0
BACKOFF_S = (1.0, 30.0)
GIVE_UP_S = 600.0


def _node_ip() -> str:
    """The address Ray reaches this node at."""
    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _interface_of(address: str) -> str | None:
    """The network interface carrying ``address`` (gloo and NCCL bind to it), or None."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == address for a in addresses):
            return str(name)
    return None


class _WorkerActor:
    """One ``TorchTrainer`` worker in a Ray actor process (made a Ray actor class lazily)."""

    def node_ip(self) -> str:
        return _node_ip()

    def run(self, spec: WorkerSpec, rank: int, local_rank: int, world_size: int) -> None:
        """Run the worker until the driver's "shutdown" (raises what ``worker_main`` raises)."""
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world_size))
        # gloo binds to the address its host name resolves to: on a multi-node cluster that may
        # be loopback or another namespace's; use the interface Ray reaches this node at.
        interface = _interface_of(self.node_ip())
        if interface is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
            os.environ.setdefault("NCCL_SOCKET_IFNAME", interface)
        worker_main(spec)


_actor_class: Any = None


def _remote_actor() -> Any:
    global _actor_class
    if _actor_class is None:
        _actor_class = ray.remote(_WorkerActor)
    return _actor_class


class RayWorkerGroup(WorkerGroup):
    """``num_workers`` Ray actors, bundle ``offset + i`` of ``group`` for rank ``i``.

    Arguments:
        store, spec, num_workers: as ``WorkerGroup``.
        group: the placement group holding one bundle per worker.
        offset: the first worker's bundle index.
        bundle: each actor's resources (``CPU``, ``GPU``, custom).
        owned: remove ``group`` when the workers end (False for a Tune trial's group).
    """

    def __init__(
        self,
        store: dist.TCPStore,
        spec: WorkerSpec,
        num_workers: int,
        group: PlacementGroup,
        offset: int,
        bundle: dict[str, float],
        owned: bool,
    ) -> None:
        super().__init__(store, spec, num_workers)
        self._group = group
        self._owned = owned
        resources = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")}
        self.actors = [
            _remote_actor()
            .options(
                num_cpus=bundle.get("CPU", 0),
                num_gpus=bundle.get("GPU", 0),
                resources=resources,
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=offset + rank
                ),
            )
            .remote()
            for rank in range(num_workers)
        ]
        self.node_ips: list[str] = []
        self._start()

    def _run_workers(self) -> None:
        try:
            self.node_ips = ray.get([actor.node_ip.remote() for actor in self.actors])
            # Local rank: the worker's index among the group's workers on its node.
            local_ranks = [self.node_ips[:rank].count(ip) for rank, ip in enumerate(self.node_ips)]
            use_gpu = self._spec.use_gpu
            pending = [
                actor.run.remote(
                    self._spec,
                    rank,
                    0 if use_gpu else local_ranks[rank],  # Ray shows each actor one GPU
                    self._size,
                )
                for rank, actor in enumerate(self.actors)
            ]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                ray.get(done)  # RayActorError (actor lost) or RayTaskError (the worker raised)
        finally:
            # As the elastic agent stops the group when one worker fails: the others may be
            # blocked in a collective with the lost one until timeout_s.
            self._kill()

    def _kill(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if self._owned:
            with contextlib.suppress(Exception):
                remove_placement_group(self._group)

    def _terminate(self, sig: signal.Signals) -> None:
        self._kill()


class RayLauncher:
    """Starts ``RayWorkerGroup``s on the Ray cluster this process is connected to.

    Arguments:
        num_workers: the workers wanted.
        num_cpus_per_worker / use_gpu / resources_per_worker: each worker's bundle.

    Raises:
        ValueError: the whole cluster has less of a resource than one worker's bundle.
    """

    def __init__(
        self,
        num_workers: int,
        num_cpus_per_worker: float,
        use_gpu: bool,
        resources_per_worker: dict[str, float] | None,
    ) -> None:
        self.num_workers = num_workers
        self.bundle: dict[str, float] = {"CPU": float(num_cpus_per_worker)}
        if use_gpu:
            self.bundle["GPU"] = 1.0
        self.bundle.update(resources_per_worker or {})
        self.bundle = {k: v for k, v in self.bundle.items() if v}
        # A resource the cluster does not have at all would make every placement pend until
        # GIVE_UP_S: say so now, naming it.
        totals = ray.cluster_resources()  # type: ignore[no-untyped-call]
        for name, amount in self.bundle.items():
            if totals.get(name, 0) < amount:
                raise ValueError(
                    f"resources_per_worker / num_cpus_per_worker / use_gpu: each worker needs "
                    f"{amount} {name}, and the Ray cluster has {totals.get(name, 0)} in all"
                )
        self.store_host = _node_ip()
        self.ship_state = True  # workers on other nodes do not see the driver's disk
        self._trial_group = get_current_placement_group()

    def __call__(
        self, store: dist.TCPStore, spec_for: Callable[[int], WorkerSpec], log_dir: str
    ) -> WorkerGroup:
        if self._trial_group is not None:  # a Tune trial: its bundles 1..n are the workers'
            return RayWorkerGroup(
                store,
                spec_for(self.num_workers),
                self.num_workers,
                self._trial_group,
                offset=len(self._trial_group.bundle_specs) - self.num_workers,
                bundle=self.bundle,
                owned=False,
            )
        group, size = self._place()
        try:
            spec = spec_for(size)
        except BaseException:
            remove_placement_group(group)
            raise
        return RayWorkerGroup(store, spec, size, group, 0, self.bundle, owned=True)

    def _try(self, size: int, timeout: float) -> PlacementGroup | None:
        group = placement_group([dict(self.bundle)] * size, strategy="SPREAD")
        ready, _ = ray.wait([group.ready()], timeout=timeout)
        if ready:
            return group  # type: ignore[no-any-return]
        remove_placement_group(group)
        return None

    def _place(self) -> tuple[PlacementGroup, int]:
        """A ready placement group of as many bundles as fit (``num_workers`` at most).

        Raises:
            RuntimeError: not even one worker's bundle fitted for ``GIVE_UP_S`` seconds.
        """
        delay, deadline = BACKOFF_S[0], time.monotonic() + GIVE_UP_S
        while True:
            for size in range(self.num_workers, 0, -1):
                timeout = PLACE_TIMEOUT_S if size == self.num_workers else SMALLER_TIMEOUT_S
                group = self._try(size, timeout)
                if group is not None:
                    return group, size
            if time.monotonic() + delay > deadline:
                raise RuntimeError(
                    f"TorchTrainer: no Ray node has room for one worker ({self.bundle}) "
                    f"after {GIVE_UP_S:.0f} s"
                )
            time.sleep(delay)
            delay = min(delay * 2, BACKOFF_S[1])

    def can_grow(self, size: int) -> bool:
        if self._trial_group is not None or size >= self.num_workers:
            return False
        # Cheap first: without that much free in the whole cluster no node has it.
        free = ray.available_resources()  # type: ignore[no-untyped-call]
        if any(free.get(name, 0) < amount for name, amount in self.bundle.items()):
            return False
        group = self._try(1, GROW_PROBE_S)
        if group is None:
            return False
        remove_placement_group(group)
        return True


def reachable() -> bool:
    """Whether ``TorchTrainer`` runs on Ray: this process is connected to Ray, or
    ``RAY_ADDRESS`` names a cluster (then it connects)."""
    if ray.is_initialized():
        return True
    if os.environ.get("RAY_ADDRESS"):
        ray.init()  # reads RAY_ADDRESS
        return True
    return False


def cluster_gpus() -> float:
    return float(ray.cluster_resources().get("GPU", 0))  # type: ignore[no-untyped-call]
