"""What a batch job's node process does (``workers.slurm_node``, ``workers.ray_node``): find its
host among the job's, run its one run's part as a host agent would, and preempt that run when
the job is told to end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from workers.config import AgentConfigError, settings

logger = logging.getLogger("headway.worker")


def node_host(
    env: Mapping[str, str], hosts_var: str, keys_var: str, index: int, part: str, inside: str
) -> tuple[str, str]:
    """``(host name, host key)`` of part ``index`` of a batch job, from the comma-separated host
    names and keys the master put in the job's variables ``hosts_var`` and ``keys_var``.

    Arguments:
        env: the job's variables (a missing or empty one counts as unset).
        part: what ``index`` counts, for messages ("node", "bundle").
        inside: what the message of unset variables says the node process needs
            ("workers.ray_node runs inside a Headway Ray job").

    Raises:
        AgentConfigError: a variable is unset, or the lists do not cover part ``index``.
    """
    missing = [name for name in (hosts_var, keys_var) if not env.get(name)]
    if missing:
        raise AgentConfigError(f"{', '.join(missing)} unset: {inside}")
    names, keys = env[hosts_var].split(","), env[keys_var].split(",")
    if len(names) != len(keys) or not 0 <= index < len(names):
        raise AgentConfigError(
            f"{part} {index} of a job whose {hosts_var} lists {len(names)} hosts and "
            f"{keys_var} {len(keys)} keys"
        )
    return names[index], keys[index]


def preempt_in_background(why: str, thread_name: str) -> None:
    """Preempt this node's run (checkpoint if the trial listens, then SIGTERM and SIGKILL after
    ``HEADWAY_KILL_GRACE_SECONDS``) in a daemon thread: callers are signal handlers and
    watchers, and preempting calls the master. A no-op once shutting down."""
    from workers import supervision

    if supervision.shutting_down.is_set():
        return
    logger.warning("%s: preempting this node's run", why)
    threading.Thread(
        target=supervision.preempt_all_runs,
        args=(settings.HEADWAY_KILL_GRACE_SECONDS,),
        name=thread_name,
        daemon=True,
    ).start()


def run_node_part(index: int, trial_id: int, run_id: int, host_name: str) -> None:
    """Run node ``index``'s part of the run (the run itself on node 0, its share ``index`` on
    the others) under a host heartbeat, until the trial's processes ended. Needs the agent's
    settings loaded for ``host_name`` (``workers.config.reload``)."""
    from workers import hosts, runner

    heartbeat = hosts.HostHeartbeat(hosts.detect_host(), settings.HEADWAY_HOST_HEARTBEAT_SECONDS)
    heartbeat.skip_redispatch()  # no Celery queue here: this process runs its one run itself
    heartbeat.start()
    try:
        if index == 0:
            code = runner.run_trial(trial_id, run_id)
        else:
            code = runner.run_trial_share(trial_id, run_id, index)
        logger.info("trial %s run %s node %s ended with code %s", trial_id, run_id, index, code)
    finally:
        try:
            heartbeat.stop()
        except Exception:
            logger.exception("could not mark host %s stopped", host_name)
