"""The ``ray`` pool type: each run of a ray pool is one Ray job on the admin's Ray cluster.

``provider.PROVIDER`` is its ``registry.pools.provider.PoolProvider`` (found by
``registry.pools.discovery``); ``_client`` speaks to the cluster (Ray's Jobs and State APIs),
``_submit`` and ``_reconcile`` keep runs and jobs in step, ``models`` holds its tables and
``settings`` a pool entry's settings. Inside the job, ``workers.ray_node`` (the host side) makes
the run's placement group and runs one Headway node per bundle. This package's ``__init__``
imports nothing, so the pools file can be read before Django loads.
"""
