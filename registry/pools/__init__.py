"""Resource pools (Determined's): the admin's named groups of hosts that experiments choose.

``HEADWAY_RESOURCE_POOLS`` names the admin's YAML file (``_file``: loading and checking it);
an experiment picks a pool with ``resources.resource_pool`` (checked here at submission), a
worker host joins one with ``HEADWAY_RESOURCE_POOL`` (checked when the worker starts), and
placement (``registry.scheduling``) puts a run only on hosts of its pool. ``_summary`` counts
what each pool holds for the REST API, the CLI and the dashboard.
"""

from __future__ import annotations

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
from registry.pools._summary import PoolSummary, hosts_by_pool, pool_summaries

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


__all__ = [
    "DEFAULT_POOL",
    "ENV",
    "RESOURCE_POOL_FIELD",
    "PoolSummary",
    "ResourcePool",
    "ResourcePools",
    "check_resource_pool",
    "check_worker_pool",
    "hosts_by_pool",
    "load_resource_pools",
    "pool_summaries",
    "resource_pools",
]
