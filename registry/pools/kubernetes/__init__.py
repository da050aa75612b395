"""Kubernetes pools: a design, not yet a pool type.

No Kubernetes control plane can run where Headway is built and tested, so nothing here is wired
into the pools file, the scheduler or the master's worker: ``HEADWAY_RESOURCE_POOLS`` refuses
``type: kubernetes`` like any unknown type. What is here are the pure functions that build the
objects such a pool would create for one run (``specs``: an indexed Job, its headless Service,
the Secret of its host keys, the PodGroup when the coscheduling plugin gangs it) from the
pool's admin settings (``_settings``), checked in the tests against the official Kubernetes
client's models. The design, mapped onto the pool provider's methods, is
docs/design/kubernetes-pools.md.

This package imports nothing on purpose (no Django, no client, no provider object), so that
importing it while pools are discovered costs nothing and finds no pool type.
"""
