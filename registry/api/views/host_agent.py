"""``/api/v1/host-agent/``: what a worker host asks of the master, with its host token.

A host registers and heartbeats itself, claims the runs placed on it, fetches their launch spec,
model definition and run token, reports their state and exit, streams their output, and does
the same for its shares of runs over several hosts. Only host tokens pass (``IsHostAgent``);
each call touches only the calling host's runs (``registry.lifecycle.host_agent``: another
host's are 403). Answers are ``headway.client`` wire models; ``headway.client.RegistryAPI`` has
one method per route. docs/rest-api.md "Host agent".

Each route is one row of ``ROUTES`` (``registry.api.host_routes``: path, method, handler, body
serializer, answer) and a handler below, called as ``handler(host, **path_ids, **body_fields)``
and returning the answer's data; its docstring's first line is the route's OpenAPI summary, the
rest its description.
"""

from __future__ import annotations

import logging
from typing import Any

from headway.client import _wire as wire
from registry.api import host_agent_serializers as bodies
from registry.api.host_routes import host_urls, on_host, on_run, on_share
from registry.lifecycle import host_agent as agent
from registry.lifecycle._standin import stand_in_if_silent
from registry.models import RunShare, TrialRun

logger = logging.getLogger("headway.lifecycle")

GZIP = "application/gzip"


def _run_status(run: TrialRun) -> dict[str, Any]:
    return {"state": run.state, "stop_requested": run.stop_requested}


def _share_status(share: RunShare) -> dict[str, Any]:
    return _run_status(share.run) | {"share_state": share.state}


# -- the host ------------------------------------------------------------------------------------


def host_heartbeat(host: str, **body: Any) -> dict[str, Any]:
    """Register or heartbeat this host.

    Renew the leases it lists, upsert the token's host (pool, devices); ``redispatch`` (a
    worker's first beat) sends again the runs placed on it and not yet claimed; then, when
    the beat can make a placement possible (a host new or back alive, changed slots,
    devices, gpu, pool or namespace, ``redispatch``), a placement pass that never waits for
    a running one. The answer names the listed runs
    and shares the master already ended (``stale_runs``, ``stale_shares``): the host stops
    them, and is not placeable while it lists any. While the master worker is silent, the
    beat also runs its lost-run reaper pass (``registry.lifecycle._standin``)."""
    beat = agent.host_beat(host, **body)
    row = beat.row
    fields = {f: getattr(row, f) for f in wire.HostInfo.model_fields if hasattr(row, f)}
    extra: dict[str, Any] = {"redispatched": beat.resent, "renewed": beat.renewed}
    extra |= agent.host_timing()
    extra |= {"stale_runs": beat.stale_runs, "stale_shares": beat.stale_shares}
    try:
        # While the master worker is silent this web server runs its lost-run reaper.
        stand_in_if_silent()
    except Exception:  # the beat was served: a failed stand-in pass is the next one's
        logger.exception("the web tier's stand-in reaper pass failed")
    return fields | extra


def host_stopped(host: str) -> None:
    """This host's worker stops.

    No run is placed on this host from now on (its heartbeat is cleared)."""
    agent.host_stop(host)


# -- a run placed on this host (the chief's part) -----------------------------------------------


def run_claim(host: str, trial_id: int, run_id: int, *, worker: str) -> dict[str, Any]:
    """Claim a run placed on this host.

    One delivery of a run's task gets ``claimed: true`` (a conditional UPDATE)."""
    return {"claimed": agent.run_claim(host, trial_id, run_id, worker=worker)}


def run_spec(host: str, trial_id: int, run_id: int) -> Any:
    """A run's launch spec.

    Hparams, config, checkpoint to resume, this host's slots and devices, other hosts."""
    return agent.launch_spec(host, trial_id, run_id)


def run_model_definition(host: str, trial_id: int, run_id: int) -> bytes:
    """A run's model definition (tar.gz).

    The experiment's model definition archive, as uploaded."""
    return agent.model_definition(host, trial_id, run_id)


def run_token(host: str, trial_id: int, run_id: int) -> dict[str, Any]:
    """A run's token.

    The trial-scoped token its processes use (``HEADWAY_TOKEN``), while not EXITED."""
    return {"token": agent.run_token(host, trial_id, run_id)}


def run_running(host: str, trial_id: int, run_id: int) -> dict[str, Any]:
    """A run's process started.

    STARTING becomes RUNNING."""
    return _run_status(agent.run_running(host, trial_id, run_id))


def run_heartbeat(host: str, trial_id: int, run_id: int) -> dict[str, Any]:
    """Heartbeat a run.

    The run's host is alive; the answer's stop_requested says whether to stop it."""
    return _run_status(agent.run_heartbeat(host, trial_id, run_id))


def run_preempt(host: str, trial_id: int, run_id: int) -> dict[str, Any]:
    """Preempt a run (host shutdown).

    Ask the run to checkpoint and stop so it resumes elsewhere (its trial stays ACTIVE)."""
    return _run_status(agent.run_preempt(host, trial_id, run_id))


def run_exit(
    host: str, trial_id: int, run_id: int, *, exit_code: int | None, reason: str
) -> dict[str, Any]:
    """Report a run's exit.

    The lifecycle decides what is next (completed, re-queued, restarted, error)."""
    run = agent.run_exit(host, trial_id, run_id, exit_code=exit_code, reason=reason)
    return _run_status(run)


def run_logs(
    host: str, trial_id: int, run_id: int, node_rank: int = 0, *, lines: list[dict[str, Any]]
) -> dict[str, Any]:
    """Append a run's output lines.

    Lines become the trial's logs (NUL-free, cut at HEADWAY_MAX_LOG_LINE_CHARS); a line
    at or below the highest position stored for the run (or share) is skipped (a resend)."""
    rows = [(line["message"], line["timestamp"], line["position"]) for line in lines]
    count = agent.append_logs(host, trial_id, run_id, rows, node_rank=node_rank)
    return {"accepted": count}


def run_rendezvous(host: str, trial_id: int, run_id: int, **body: Any) -> Any:
    """Publish a run's rendezvous (chief).

    The chief's host tells the run's other hosts where to meet."""
    return agent.run_publish_rendezvous(host, trial_id, run_id, **body)


def run_shares(host: str, trial_id: int, run_id: int) -> dict[str, Any]:
    """A run's shares (chief).

    The other hosts' parts: state, exit code, last heartbeat."""
    return {"shares": agent.run_shares(host, trial_id, run_id)}


# -- this host's share of a run over several hosts ----------------------------------------------


def share_claim(
    host: str, trial_id: int, run_id: int, node_rank: int, *, worker: str
) -> dict[str, Any]:
    """Claim this host's share of a run.

    One delivery of a share's task gets ``claimed: true``."""
    return {"claimed": agent.share_claim(host, trial_id, run_id, node_rank, worker=worker)}


def share_spec(host: str, trial_id: int, run_id: int, node_rank: int) -> Any:
    """A share's launch spec.

    As a run's, with this share's slots and devices."""
    return agent.launch_spec(host, trial_id, run_id, node_rank)


def share_model_definition(host: str, trial_id: int, run_id: int, node_rank: int) -> bytes:
    """A share's model definition (tar.gz).

    The experiment's model definition archive, as uploaded."""
    return agent.model_definition(host, trial_id, run_id, node_rank)


def share_token(host: str, trial_id: int, run_id: int, node_rank: int) -> dict[str, Any]:
    """A share's run token.

    The run's token, for this host's ranks."""
    return {"token": agent.share_token(host, trial_id, run_id, node_rank)}


def share_rendezvous(host: str, trial_id: int, run_id: int, node_rank: int) -> Any:
    """A share's rendezvous.

    Where to meet once the chief published it (``ready``); heartbeats the share."""
    return agent.share_rendezvous(host, trial_id, run_id, node_rank)


def share_running(host: str, trial_id: int, run_id: int, node_rank: int) -> dict[str, Any]:
    """A share's processes started.

    STARTING becomes RUNNING."""
    return _share_status(agent.share_running(host, trial_id, run_id, node_rank))


def share_heartbeat(host: str, trial_id: int, run_id: int, node_rank: int) -> dict[str, Any]:
    """Heartbeat a share.

    The share's host is alive; the answer carries the run's state and stop request."""
    return _share_status(agent.share_heartbeat(host, trial_id, run_id, node_rank))


def share_exit(
    host: str, trial_id: int, run_id: int, node_rank: int, *, exit_code: int | None
) -> dict[str, Any]:
    """Report a share's exit.

    The chief's host sees it (``shares/``) and decides the run's exit."""
    return _share_status(agent.share_exit(host, trial_id, run_id, node_rank, exit_code=exit_code))


B = bodies
# In the order Django tries them and the schema lists them.
ROUTES = [
    on_host("heartbeat/", "post", host_heartbeat, B.HostHeartbeatRequestSerializer, wire.HostInfo),
    on_host("stopped/", "post", host_stopped),
    on_run("claim/", "post", run_claim, B.ClaimRequestSerializer, wire.Claim),
    on_run("spec/", "get", run_spec, None, wire.LaunchSpec),
    on_run("model-definition/", "get", run_model_definition, None, GZIP),
    on_run("token/", "get", run_token, None, wire.RunToken),
    on_run("running/", "post", run_running, None, wire.RunStatus),
    on_run("heartbeat/", "post", run_heartbeat, None, wire.RunStatus),
    on_run("preempt/", "post", run_preempt, None, wire.RunStatus),
    on_run("exit/", "post", run_exit, B.RunExitRequestSerializer, wire.RunStatus),
    on_run("logs/", "post", run_logs, B.LogBatchRequestSerializer, wire.LogsAccepted),
    on_run("rendezvous/", "post", run_rendezvous, B.RendezvousRequestSerializer, wire.Rendezvous),
    on_run("shares/", "get", run_shares, None, wire.ShareStatusList),
    on_share("claim/", "post", share_claim, B.ClaimRequestSerializer, wire.Claim),
    on_share("spec/", "get", share_spec, None, wire.LaunchSpec),
    on_share("model-definition/", "get", share_model_definition, None, GZIP),
    on_share("token/", "get", share_token, None, wire.RunToken),
    on_share("rendezvous/", "get", share_rendezvous, None, wire.Rendezvous),
    on_share("running/", "post", share_running, None, wire.RunStatus),
    on_share("heartbeat/", "post", share_heartbeat, None, wire.RunStatus),
    # The run's handler with the share's node_rank (the chief's own lines are rank 0).
    on_share("logs/", "post", run_logs, B.LogBatchRequestSerializer, wire.LogsAccepted),
    on_share("exit/", "post", share_exit, B.ExitRequestSerializer, wire.RunStatus),
]

urlpatterns = host_urls(ROUTES)
