"""Resource pools (Determined's): the admin's named groups of hosts that experiments choose.

``HEADWAY_RESOURCE_POOLS`` names the admin's YAML file (``_file``: loading and checking it);
an experiment picks a pool with ``resources.resource_pool`` (checked here at submission), a
worker host joins one with ``HEADWAY_RESOURCE_POOL`` (checked when the worker starts), and
placement (``registry.scheduling``) puts a run only on hosts of its pool; ``registry.scheduling``
also counts what each pool holds (``pool_summaries``). Each pool type is a folder
``registry/pools/<type>/`` with its ``PoolProvider`` (``provider``), found by ``discovery``;
general code asks the provider of a pool's type and never imports a type's folder.

This package never imports ``registry.scheduling`` or ``registry.lifecycle`` (an import
contract): they build on it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from registry.errors import InvalidInput
from registry.pools._file import (
    DEFAULT_POOL,
    ENV,
    ResourcePool,
    ResourcePools,
    load_resource_pools,
    resource_pools,
)
from registry.pools.discovery import (
    DEFAULT_TYPE,
    per_run_providers,
    poll_schedule,
    pool_provider,
    pool_providers,
)
from registry.pools.provider import (
    HostOrigin,
    NoNodes,
    PoolNode,
    PoolProvider,
    PoolSummary,
    RunExited,
)

RESOURCE_POOL_FIELD = "config.resources.resource_pool"


def check_resource_pool(name: str, *, field: str = RESOURCE_POOL_FIELD) -> ResourcePool:
    """The pool ``name`` an experiment asks for.

    Raises:
        InvalidInput: keyed ``field`` (400), naming the known pools, for a pool the admin's file
            does not list.
    """
    found = resource_pools()
    pool = found.pools.get(name)
    if pool is None:
        raise InvalidInput(
            {field: [f"unknown resource pool {name!r}; the resource pools: {found.known()}"]}
        )
    return pool


def check_worker_pool(name: str) -> ResourcePool:
    """The pool a worker host joins (``HEADWAY_RESOURCE_POOL``).

    Raises:
        ImproperlyConfigured: naming ``HEADWAY_RESOURCE_POOL`` and the known pools, for a pool
            the admin's file does not list: the worker must not start (its host would never
            get a run).
    """
    found = resource_pools()
    pool = found.pools.get(name)
    if pool is None:
        raise ImproperlyConfigured(
            f"HEADWAY_RESOURCE_POOL={name!r} is not a resource pool; the resource pools: "
            f"{found.known()} (the admin lists them in the file {ENV} names)"
        )
    return pool


def made_host_provider(pool: str) -> PoolProvider:
    """The provider of the pool type that made a host of pool ``pool`` for one run: the pool's
    own type while the file lists it, else the first type whose hosts are per run.

    Raises:
        LookupError: no pool type makes hosts per run.
    """
    found = resource_pools().pools.get(pool)
    if found is not None and found.hosts_per_run:
        return pool_provider(found.type)
    providers = per_run_providers()
    if not providers:
        raise LookupError("no pool type makes hosts per run")
    return providers[0]


def add_poll_entries(schedule: dict[str, dict[str, object]], queue: str) -> None:
    """Add to ``schedule`` (``CELERY_BEAT_SCHEDULE``, in place: Celery's beat reads that dict
    when it starts, after Django loaded the apps) one entry ``pool-poll-<type>`` per pool type
    that polls, sending ``headway.pool_poll`` with the type to ``queue`` at the type's interval
    (``PoolProvider.poll_seconds``); a send not taken within 60 s is dropped.

    Raises:
        ImproperlyConfigured: a type's interval setting is not a positive number.
    """
    for type_name, seconds in poll_schedule().items():
        schedule[f"pool-poll-{type_name}"] = {
            "task": "headway.pool_poll",
            "schedule": seconds,
            "args": (type_name,),
            "options": {"queue": queue, "expires": 60},
        }


def poll_pools(type_name: str, namespace: str | None = None, *, run_exited: RunExited) -> list[int]:
    """One poll of the configured pools of type ``type_name`` in ``namespace`` (default
    ``HEADWAY_QUEUE``): the provider's ``reconcile``, then its ``submit``; returns what it
    submitted. Does nothing without a pool of that type in ``HEADWAY_RESOURCE_POOLS``.

    Raises:
        KeyError: no pool type ``type_name``.
        Exception: what the provider's ``reconcile`` raises (its cluster unreachable).
    """
    provider = pool_provider(type_name)
    pools: Sequence[ResourcePool] = resource_pools().of_type(type_name)
    if not pools:
        return []
    namespace = namespace or settings.CELERY_TASK_DEFAULT_QUEUE
    provider.reconcile(namespace, pools, run_exited)
    return provider.submit(namespace, pools)


__all__ = [
    "DEFAULT_POOL",
    "DEFAULT_TYPE",
    "ENV",
    "RESOURCE_POOL_FIELD",
    "HostOrigin",
    "NoNodes",
    "PoolNode",
    "PoolProvider",
    "PoolSummary",
    "ResourcePool",
    "ResourcePools",
    "RunExited",
    "add_poll_entries",
    "check_resource_pool",
    "check_worker_pool",
    "load_resource_pools",
    "made_host_provider",
    "per_run_providers",
    "poll_pools",
    "poll_schedule",
    "pool_provider",
    "pool_providers",
    "resource_pools",
]
