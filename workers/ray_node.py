"""``python -m workers.ray_node``: a run's Ray job, from its driver to each node's part.

The master submits each run of a ray pool as one Ray job (``registry.pools.ray``) whose entry
point is this module without arguments, the *driver*:

1. Makes the run's placement group: ``HEADWAY_RAY_BUNDLES`` (JSON, one bundle per slot) with
   ``HEADWAY_RAY_STRATEGY`` (``PACK`` or ``STRICT_SPREAD``), named
   ``HEADWAY_RAY_PLACEMENT_GROUP``, and waits until Ray places it (the master shows why it
   waits, in Ray's words).
2. Starts one actor (``NodeActor``) per bundle, holding that bundle's resources; actor ``i``
   starts ``python -m workers.ray_node --node i``, the *node process*, detached from the actor
   (``--detach``) so that Ray, which SIGKILLs an actor's children when it dies, never kills it
   before it stopped its trial's processes.
3. Exits 0 when every node process ended (the run's outcome went to the master over REST), or
   ``LOST_EXIT`` (75) when an actor or its Ray node was lost: it kills the other actors, whose
   node processes then preempt their run (below), and the master re-queues the run, not
   counted against ``max_restarts``.

Each node process acts as a host agent for exactly one run, like ``workers.slurm_node``: it
takes its host name and key from ``HEADWAY_RAY_HOSTS`` / ``HEADWAY_RAY_HOST_KEYS`` (by its
index), registers and heartbeats that host, runs the run (node 0) or share ``i``, marks the
host stopped and exits. It sets ``HEADWAY_BATCH_JOB_NODE=1`` (``workers.supervision``): no run
is left for an agent to re-attach. ``SIGTERM``, or its actor gone (the job stopped, the driver
or a Ray node lost), make it preempt its run as an agent's warm shutdown does: a trial that
watches ``should_preempt()`` checkpoints and exits, one that does not is killed after
``HEADWAY_KILL_GRACE_SECONDS``, and no process of the run outlives it.

Ray is imported only by the driver and the actors; the node process needs none of it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from workers import batch_node
from workers.config import AgentConfigError, reload

logger = logging.getLogger("headway.worker")

# The driver's exit status when an actor or its Ray node was lost (the master's
# registry.pools.ray._client.LOST_EXIT: an infrastructure failure).
LOST_EXIT = 75
# How often a node process checks that its actor is alive, and an actor that its node process is.
WATCH_SECONDS = 1.0
ACTOR_PID = "HEADWAY_RAY_ACTOR_PID"


def _job_variables() -> dict[str, str]:
    """The job's host variables from this process's environment ("" when unset)."""
    return {
        "HEADWAY_RAY_HOSTS": os.environ.get("HEADWAY_RAY_HOSTS", ""),
        "HEADWAY_RAY_HOST_KEYS": os.environ.get("HEADWAY_RAY_HOST_KEYS", ""),
    }


def _node_identity(env: dict[str, str], index: int) -> tuple[str, str]:
    """``(host name, host key)`` of bundle ``index`` from the job's variables.

    Raises:
        AgentConfigError: a variable is missing, or the lists do not cover this bundle.
    """
    return batch_node.node_host(
        env,
        "HEADWAY_RAY_HOSTS",
        "HEADWAY_RAY_HOST_KEYS",
        index,
        "bundle",
        "workers.ray_node runs inside a Headway Ray job",
    )


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody reaped yet counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class NodeActor:
    """One bundle's actor (made a Ray actor by the driver): starts and watches the bundle's
    node process."""

    def run(self, index: int) -> int:
        """Start node process ``index`` detached and return when it ended: 0, or the
        detaching process's exit status when it could not start."""
        env = {**os.environ, ACTOR_PID: str(os.getpid())}
        argv = [sys.executable, "-m", "workers.ray_node", "--detach", "--node", str(index)]
        starter = subprocess.run(argv, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if starter.returncode != 0 or not starter.stdout.strip().isdigit():
            return starter.returncode or 1
        pid = int(starter.stdout.strip())
        while _alive(pid):
            time.sleep(WATCH_SECONDS)
        return 0

    def address(self) -> str:
        """The address of the Ray node the actor runs on."""
        import ray

        return str(ray.util.get_node_ip_address())


def driver() -> int:
    """The job's entry point (see module); returns the driver's exit status.

    Raises:
        AgentConfigError: the job's placement variables are missing or malformed.
    """
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    try:
        bundles = json.loads(os.environ["HEADWAY_RAY_BUNDLES"])
        strategy = os.environ["HEADWAY_RAY_STRATEGY"]
        name = os.environ["HEADWAY_RAY_PLACEMENT_GROUP"]
    except (KeyError, ValueError) as exc:
        raise AgentConfigError(f"not a Headway Ray job's driver: {exc}") from exc
    ray.init(log_to_driver=True)
    group = placement_group(bundles, strategy=strategy, name=name)
    logger.info(
        "placement group %s: %s bundle(s) %s, waiting for Ray", name, len(bundles), strategy
    )
    ray.get(group.ready())
    # By reference (this module, not __main__): the Ray nodes import it, as the node processes do.
    from workers.ray_node import NodeActor as actor_class

    remote = ray.remote(actor_class)
    actors: list[Any] = []  # Ray's actor handles (its stubs type them loosely)
    for index, bundle in enumerate(bundles):
        amounts = dict(bundle)
        actors.append(
            remote.options(
                num_cpus=amounts.pop("CPU", 0),
                num_gpus=amounts.pop("GPU", 0),
                memory=amounts.pop("memory", None),
                resources=amounts,
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=index
                ),
            ).remote()
        )
    where = ray.get([actor.address.remote() for actor in actors])
    logger.info("bundles placed on %s", ", ".join(f"{i}: {a}" for i, a in enumerate(where)))
    runs = {actor.run.remote(index): index for index, actor in enumerate(actors)}
    pending = list(runs)
    code = 0
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            code = ray.get(done[0]) or code
        except ray.exceptions.RayTaskError as exc:
            logger.error("bundle %s's actor failed: %s", runs[done[0]], exc)
            code = 1
        except ray.exceptions.RayError as exc:
            # The actor or its node died: the others' node processes preempt their run.
            logger.error("bundle %s on %s lost: %s", runs[done[0]], where[runs[done[0]]], exc)
            for actor in actors:
                ray.kill(actor)
            return LOST_EXIT
    return code


def _detach() -> None:
    """Fork: the parent prints the child's pid and exits; the child goes on in a session of
    its own with its output on the actor's stderr (Ray streams it to the job's log)."""
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        os._exit(0)
    os.setsid()
    os.dup2(2, 1)


def _preempt(why: str) -> None:
    batch_node.preempt_in_background(why, "headway-ray-preempt")


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _preempt(f"{signal.Signals(signum).name} received")


def _watch_actor(pid: int) -> None:
    while _alive(pid):
        time.sleep(WATCH_SECONDS)
    _preempt(f"its Ray actor (pid {pid}) ended")


def node(index: int) -> int:
    """Run bundle ``index``'s part of the job's run (see module); return the exit status: 0
    once the outcome reached the master, 2 for a process started without Headway's
    variables."""
    try:
        name, key = _node_identity(_job_variables(), index)
        trial_id = int(os.environ["HEADWAY_TRIAL_ID"])
        run_id = int(os.environ["HEADWAY_RUN_ID"])
    except (AgentConfigError, KeyError, ValueError) as exc:
        print(f"headway ray node: {exc}", file=sys.stderr)
        return 2
    os.environ["HEADWAY_HOST_NAME"] = name
    os.environ["HEADWAY_HOST_TOKEN"] = key
    # Several bundles may share a Ray node (PACK): each host keeps its own state.
    work_dir = Path(os.environ.get("HEADWAY_WORK_DIR") or Path.cwd() / "var")
    os.environ["HEADWAY_VAR_DIR"] = str(work_dir / name)
    reload()
    from workers import supervision

    os.environ[supervision.BATCH_JOB_NODE] = "1"
    signal.signal(signal.SIGTERM, _on_signal)
    actor = os.environ.get(ACTOR_PID, "")
    if actor.isdigit():
        threading.Thread(
            target=_watch_actor, args=(int(actor),), name="headway-ray-actor", daemon=True
        ).start()
    logger.info("Ray bundle %s: host %s, trial %s run %s", index, name, trial_id, run_id)
    batch_node.run_node_part(index, trial_id, run_id, name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``[--detach] [--node I]``: the driver without ``--node`` (see module)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    if "--node" not in args:
        try:
            return driver()
        except AgentConfigError as exc:
            print(f"headway ray driver: {exc}", file=sys.stderr)
            return 2
    try:
        index = int(args[args.index("--node") + 1])
    except (IndexError, ValueError):
        print("headway ray node: --node takes a bundle index", file=sys.stderr)
        return 2
    if "--detach" in args:
        _detach()
    return node(index)


if __name__ == "__main__":
    sys.exit(main())
