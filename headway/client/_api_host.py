"""``RegistryAPI``'s host routes: a worker host's agent (host token) and the host-token admin
routes. Answers are the wire models the server builds them from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from headway.client._api_base import APIBase
from headway.client._lazy_wire import wire

# text, ``(text, timestamp)``, or ``(text, timestamp, position)``: the line's position in the
# run's output (its line number, or the output file's byte offset past it), increasing within
# a batch; the master skips a line at or below the highest position it stored (a resend).
LogLine = str | tuple[str, datetime | None] | tuple[str, datetime | None, int | None]


def _log_lines(lines: Iterable[LogLine]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        message, when, position = (line, None, None) if isinstance(line, str) else (*line, None)[:3]
        item: dict[str, Any] = {"message": message, "timestamp": when.isoformat() if when else None}
        if position is not None:
            item["position"] = position
        out.append(item)
    return out


class HostAPI(APIBase):
    """The host agent's calls and the host-token admin calls (see ``RegistryAPI``)."""

    # -- the host ------------------------------------------------------------------------------

    def host_heartbeat(
        self,
        *,
        pool: str,
        devices: Sequence[str],
        gpu: bool,
        started_at: datetime,
        namespace: str | None = None,
        redispatch: bool = False,
        runs: Iterable[tuple[int, int]] = (),
        shares: Iterable[tuple[int, int, int]] = (),
        agent_id: str = "",
        agent_pid: int | None = None,
        agent_address: str = "",
    ) -> wire.HostInfo:
        """Register or heartbeat the token's host: its resource ``pool``, one device id per
        slot (lowest first), whether they are GPUs, when its worker started; ``namespace`` the
        cluster namespace its agent serves (its ``HEADWAY_QUEUE``; None: the master's); ``redispatch``
        (a worker's first beat) sends again its placed, unclaimed runs. ``runs``
        (``(trial_id, run_id)``) and ``shares`` (``(trial_id, run_id, node_rank)``) are the
        leases it holds, renewed first (``renewed`` counts them). The answer's ``queue`` is the
        host's Celery queue (the registry names it from the token). ``agent_id`` (a uuid the
        agent process draws at start), ``agent_pid`` and ``agent_address`` name the agent: a
        second agent of a host whose holder still heartbeats gets ``ConflictError`` (409)
        naming the holder."""
        body = {
            "pool": pool,
            "devices": list(devices),
            "gpu": gpu,
            "started_at": started_at.isoformat(),
            **({"namespace": namespace} if namespace else {}),
            "redispatch": redispatch,
            "runs": [{"trial_id": t, "run_id": r} for t, r in runs],
            "shares": [{"trial_id": t, "run_id": r, "node_rank": n} for t, r, n in shares],
        }
        if agent_id:
            body |= {"agent_id": agent_id, "agent_address": agent_address}
            body |= {"agent_pid": agent_pid} if agent_pid is not None else {}
        return self._call("host_heartbeat", wire.HostInfo, body)

    def host_stopped(self) -> None:
        """The host's worker shuts down: nothing more is placed on it."""
        self._request("host_stopped")

    # -- a run placed on the host -------------------------------------------------------------

    def run_claim(self, trial_id: int, run_id: int, *, worker: str) -> wire.Claim:
        """Claim a run placed on this host; ``claimed`` False: another delivery has it."""
        ids = {"trial_id": trial_id, "run_id": run_id}
        return self._call("run_claim", wire.Claim, {"worker": worker}, **ids)

    def run_spec(self, trial_id: int, run_id: int) -> wire.LaunchSpec:
        """What the host needs to start the run's chief part."""
        return self._call("run_spec", wire.LaunchSpec, trial_id=trial_id, run_id=run_id)

    def run_model_definition(self, trial_id: int, run_id: int) -> bytes:
        """The experiment's model definition archive (tar.gz bytes)."""
        return bytes(
            self._request("run_model_definition", trial_id=trial_id, run_id=run_id).content
        )

    def run_token(self, trial_id: int, run_id: int) -> str:
        """The run's trial-scoped token (``HEADWAY_TOKEN`` of its processes)."""
        return self._call("run_token", wire.RunToken, trial_id=trial_id, run_id=run_id).token

    def run_running(self, trial_id: int, run_id: int) -> wire.RunStatus:
        """The run's process started."""
        return self._call("run_running", wire.RunStatus, trial_id=trial_id, run_id=run_id)

    def run_heartbeat(self, trial_id: int, run_id: int) -> wire.RunStatus:
        """The run's host is alive; ``stop_requested`` says whether to stop it."""
        return self._call("run_heartbeat", wire.RunStatus, trial_id=trial_id, run_id=run_id)

    def run_preempt(self, trial_id: int, run_id: int) -> wire.RunStatus:
        """The worker shuts down: ask the run to checkpoint and stop (it resumes elsewhere)."""
        return self._call("run_preempt", wire.RunStatus, trial_id=trial_id, run_id=run_id)

    def run_exit(
        self, trial_id: int, run_id: int, exit_code: int | None, reason: str = ""
    ) -> wire.RunStatus:
        """Report the run's exit (``None``: stopped by the host, not the trial's failure;
        ``reason`` says why, e.g. ``host gpu-b lost its lease``)."""
        ids = {"trial_id": trial_id, "run_id": run_id}
        body = {"exit_code": exit_code, "reason": reason[:500]}
        return self._call("run_exit", wire.RunStatus, body, **ids)

    def run_logs(self, trial_id: int, run_id: int, lines: Iterable[LogLine]) -> wire.LogsAccepted:
        """Append output lines (``LogLine``) to the trial's logs; the answer counts those stored
        (a line already stored at its position is not)."""
        body = {"lines": _log_lines(lines)}
        ids = {"trial_id": trial_id, "run_id": run_id}
        return self._call("run_logs", wire.LogsAccepted, body, **ids)

    def run_rendezvous(
        self, trial_id: int, run_id: int, *, address: str, port: int
    ) -> wire.Rendezvous:
        """The chief's host publishes where the run's hosts meet; returns the chief's plan."""
        body = {"address": address, "port": port}
        ids = {"trial_id": trial_id, "run_id": run_id}
        return self._call("run_rendezvous", wire.Rendezvous, body, **ids)

    def run_shares(self, trial_id: int, run_id: int) -> list[wire.ShareStatus]:
        """The run's other hosts' parts, for the chief's host to watch."""
        ids = {"trial_id": trial_id, "run_id": run_id}
        return self._call("run_shares", wire.ShareStatusList, **ids).shares

    # -- this host's share of a run over several hosts ----------------------------------------

    def share_claim(self, trial_id: int, run_id: int, node_rank: int, *, worker: str) -> wire.Claim:
        """Claim this host's share ``node_rank``."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_claim", wire.Claim, {"worker": worker}, **ids)

    def share_spec(self, trial_id: int, run_id: int, node_rank: int) -> wire.LaunchSpec:
        """What the host needs to start its share."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_spec", wire.LaunchSpec, **ids)

    def share_model_definition(self, trial_id: int, run_id: int, node_rank: int) -> bytes:
        """The experiment's model definition archive, for the share's ranks."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return bytes(self._request("share_model_definition", **ids).content)

    def share_token(self, trial_id: int, run_id: int, node_rank: int) -> str:
        """The run's token, for the share's ranks."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_token", wire.RunToken, **ids).token

    def share_rendezvous(self, trial_id: int, run_id: int, node_rank: int) -> wire.Rendezvous:
        """Where to meet once the chief published it (``ready``); heartbeats the share."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_rendezvous", wire.Rendezvous, **ids)

    def share_running(self, trial_id: int, run_id: int, node_rank: int) -> wire.RunStatus:
        """The share's processes started."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_running", wire.RunStatus, **ids)

    def share_heartbeat(self, trial_id: int, run_id: int, node_rank: int) -> wire.RunStatus:
        """The share's host is alive; the answer has the run's state and stop request."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_heartbeat", wire.RunStatus, **ids)

    def share_logs(
        self, trial_id: int, run_id: int, node_rank: int, lines: Iterable[LogLine]
    ) -> wire.LogsAccepted:
        """Append the share's output lines to the trial's logs."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_logs", wire.LogsAccepted, {"lines": _log_lines(lines)}, **ids)

    def share_exit(
        self, trial_id: int, run_id: int, node_rank: int, exit_code: int | None
    ) -> wire.RunStatus:
        """Report the share's exit (``None``: stopped by its host)."""
        ids = {"trial_id": trial_id, "run_id": run_id, "node_rank": node_rank}
        return self._call("share_exit", wire.RunStatus, {"exit_code": exit_code}, **ids)

    # -- host tokens (admins) -----------------------------------------------------------------

    def host_token_list(self) -> list[wire.HostTokenInfo]:
        """Every host token, live and revoked (never a key)."""
        return self._call("host_token_list", wire.HostTokenList).tokens

    def host_token_create(self, name: str) -> wire.HostTokenCreated:
        """Issue a token for host ``name``; its ``key`` is shown this once (409: one is live)."""
        return self._call("host_token_create", wire.HostTokenCreated, {"name": name})

    def host_token_revoke(self, name: str) -> wire.HostTokenInfo:
        """Revoke host ``name``'s live token (404 when none)."""
        return self._call("host_token_revoke", wire.HostTokenInfo, name=name)

    # -- the admin's host operations ----------------------------------------------------------

    def host_list(self) -> list[wire.HostStatus]:
        """Every registered host: state (enabled / draining / disabled), alive, slots in use,
        pool, last heartbeat, its agent's address (admins)."""
        return self._call("host_list", wire.HostStatusList).hosts

    def host_disable(self, name: str, *, drain: bool = False) -> wire.HostStatus:
        """Place no new run on host ``name``; ``drain``: its running runs finish there, else
        they are preempted and resume elsewhere (404: no such host)."""
        return self._call("host_disable", wire.HostStatus, {"drain": drain}, name=name)

    def host_enable(self, name: str) -> wire.HostStatus:
        """Make host ``name`` placeable again (404: no such host)."""
        return self._call("host_enable", wire.HostStatus, name=name)

    def host_remove(self, name: str) -> wire.HostRemoved:
        """Forget host ``name`` and revoke its token (409 naming the runs it still holds)."""
        return self._call("host_remove", wire.HostRemoved, name=name)
