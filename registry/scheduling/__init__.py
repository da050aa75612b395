"""Slot scheduling across worker hosts (registry side; docs/scheduling.md).

Workers register their host and heartbeat (``host_heartbeat``); ``place_queued_runs`` gives
each queued run ``resources.slots_per_trial`` free slots on alive hosts of its resource pool
(one host, or a gang of hosts), by priority then submission, with backfill around the runs that
wait (EASY backfilling's reservation, Lifka 1995), assigns device ids and sends the run's Celery task to each
host's queue. ``schedule_run`` queues a run and requests a pass on commit.
Modules: ``_queue`` (queued rows), ``_requests`` (queue changes that request a pass),
``_dispatch`` (Celery tasks by name), ``_lock`` (passes serialized; heartbeats never wait),
``_snapshot`` (what a pass reads), ``_view`` (free slots, best fit, reservations),
``_placement`` (the pass), ``_hosts`` (heartbeats, leases), ``_redispatch`` (lost messages),
``_pools`` (what each resource pool holds: ``pool_summaries``, ``hosts_by_pool``).
This package never imports ``registry.lifecycle`` (an import contract): the lifecycle calls it.
"""

from registry.scheduling._hosts import (
    AgentConflict,
    backoff_message,
    gave_up_message,
    host_agent_check,
    host_heartbeat,
    host_redispatch,
    host_stopped,
    lease_expiry,
    lost_message,
    renew_leases,
    waiting_message,
)
from registry.scheduling._leases import (
    lapsed,
    lease_cutoff,
    outage_expiry,
    resume_after_outage,
    serving,
)
from registry.scheduling._overview import experiment_scheduling_message, host_list
from registry.scheduling._placement import NO_HOSTS, place_queued_runs, unplaceable_message
from registry.scheduling._pools import PoolSummary, hosts_by_pool, pool_summaries
from registry.scheduling._queue import queue_run, run_resources
from registry.scheduling._redispatch import redispatch_unclaimed_runs
from registry.scheduling._requests import drop_queued_run, request_placement, schedule_run

__all__ = [
    "NO_HOSTS",
    "AgentConflict",
    "PoolSummary",
    "backoff_message",
    "drop_queued_run",
    "experiment_scheduling_message",
    "gave_up_message",
    "host_agent_check",
    "host_heartbeat",
    "host_list",
    "host_redispatch",
    "host_stopped",
    "hosts_by_pool",
    "lapsed",
    "lease_cutoff",
    "lease_expiry",
    "lost_message",
    "outage_expiry",
    "place_queued_runs",
    "pool_summaries",
    "queue_run",
    "redispatch_unclaimed_runs",
    "renew_leases",
    "request_placement",
    "resume_after_outage",
    "run_resources",
    "schedule_run",
    "serving",
    "unplaceable_message",
    "waiting_message",
]
