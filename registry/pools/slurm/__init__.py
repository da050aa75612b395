"""The ``slurm`` pool type: each run of a slurm pool is one Slurm batch job.

``provider.PROVIDER`` is its ``registry.pools.provider.PoolProvider`` (found by
``registry.pools.discovery``); ``manager`` gathers the master's side (``poll``, the command
layer, the node exclusion); ``models`` its tables; ``settings`` a pool entry's settings. This
package's ``__init__`` imports nothing, so the pools file can be read before Django loads.
"""
