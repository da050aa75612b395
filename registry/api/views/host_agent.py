"""``/api/v1/host-agent/``: what a worker host asks of the master, with its host token.

A host registers and heartbeats itself, claims the runs placed on it, fetches their launch spec,
model definition and run token, reports their state and exit, streams their output, and does
the same for its shares of runs over several hosts. Only host tokens pass (``IsHostAgent``);
each call touches only the calling host's runs (``registry.lifecycle.host_agent``: another
host's are 403). Answers are ``headway.client`` wire models; ``headway.client.RegistryAPI`` has
one method per route. docs/rest-api.md "Host agent".
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from headway.client import _wire as wire
from registry.api import host_agent_serializers as bodies
from registry.api.answers import answer
from registry.api.host_auth import IsHostAgent, host_token_of
from registry.lifecycle import host_agent as agent
from registry.lifecycle._standin import stand_in_if_silent
from registry.models import RunShare, TrialRun

TAG = ["host agent"]
logger = logging.getLogger("headway.lifecycle")


def _run_status(run: TrialRun) -> Response:
    return answer(wire.RunStatus, {"state": run.state, "stop_requested": run.stop_requested})


def _share_status(share: RunShare) -> Response:
    run = share.run
    return answer(
        wire.RunStatus,
        {"state": run.state, "stop_requested": run.stop_requested, "share_state": share.state},
    )


class HostAgentView(APIView):
    """Base of the host routes: host tokens only; ``self.host`` is the token's host name."""

    permission_classes = (IsHostAgent,)

    @property
    def host(self) -> str:
        token = host_token_of(self.request)
        assert token is not None  # IsHostAgent let only host tokens in
        return token.name

    def body(self, serializer_class: type) -> dict[str, Any]:
        """The request body validated by ``serializer_class`` (400 naming the field)."""
        serializer = serializer_class(data=self.request.data, context={"host": self.host})
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


# -- the host ------------------------------------------------------------------------------------


class HostHeartbeatView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Register or heartbeat this host",
        request=bodies.HostHeartbeatRequestSerializer,
        responses={200: wire.HostInfo},
    )
    def post(self, request):
        """Renew the leases it lists, upsert the token's host (pool, devices); ``redispatch`` (a
        worker's first beat) sends again the runs placed on it and not yet claimed; then, when
        the beat can make a placement possible (a host new or back alive, changed slots,
        devices, gpu, pool or namespace, ``redispatch``), a placement pass that never waits for
        a running one. The answer names the listed runs
        and shares the master already ended (``stale_runs``, ``stale_shares``): the host stops
        them, and is not placeable while it lists any. While the master worker is silent, the
        beat also runs its lost-run reaper pass (``registry.lifecycle._standin``)."""
        data = self.body(bodies.HostHeartbeatRequestSerializer)
        beat = agent.host_beat(self.host, **data)
        row = beat.row
        fields = {f: getattr(row, f) for f in wire.HostInfo.model_fields if hasattr(row, f)}
        extra = {"redispatched": beat.resent, "renewed": beat.renewed} | agent.host_timing()
        extra |= {"stale_runs": beat.stale_runs, "stale_shares": beat.stale_shares}
        try:
            # While the master worker is silent this web server runs its lost-run reaper.
            stand_in_if_silent()
        except Exception:  # the beat was served: a failed stand-in pass is the next one's
            logger.exception("the web tier's stand-in reaper pass failed")
        return answer(wire.HostInfo, fields | extra)


class HostStoppedView(HostAgentView):
    @extend_schema(
        tags=TAG, summary="This host's worker stops", request=None, responses={204: None}
    )
    def post(self, request):
        """No run is placed on this host from now on (its heartbeat is cleared)."""
        agent.host_stop(self.host)
        return Response(status=204)


# -- a run placed on this host (the chief's part) -----------------------------------------------


class RunClaimView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Claim a run placed on this host",
        request=bodies.ClaimRequestSerializer,
        responses={200: wire.Claim},
    )
    def post(self, request, trial_id: int, run_id: int):
        """One delivery of a run's task gets ``claimed: true`` (a conditional UPDATE)."""
        worker = self.body(bodies.ClaimRequestSerializer)["worker"]
        claimed = agent.run_claim(self.host, trial_id, run_id, worker=worker)
        return answer(wire.Claim, {"claimed": claimed})


class RunSpecView(HostAgentView):
    @extend_schema(tags=TAG, summary="A run's launch spec", responses={200: wire.LaunchSpec})
    def get(self, request, trial_id: int, run_id: int):
        """Hparams, config, checkpoint to resume, this host's slots and devices, other hosts."""
        return answer(wire.LaunchSpec, agent.launch_spec(self.host, trial_id, run_id))


class RunModelDefinitionView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="A run's model definition (tar.gz)",
        responses={(200, "application/gzip"): bytes},
    )
    def get(self, request, trial_id: int, run_id: int):
        """The experiment's model definition archive, as uploaded."""
        archive = agent.model_definition(self.host, trial_id, run_id)
        return HttpResponse(archive, content_type="application/gzip")


class RunTokenView(HostAgentView):
    @extend_schema(tags=TAG, summary="A run's token", responses={200: wire.RunToken})
    def get(self, request, trial_id: int, run_id: int):
        """The trial-scoped token its processes use (``HEADWAY_TOKEN``), while not EXITED."""
        return answer(wire.RunToken, {"token": agent.run_token(self.host, trial_id, run_id)})


def _run_report(service: Any, summary: str, doc: str) -> type[HostAgentView]:
    """A bodiless POST on a run that calls ``service`` and answers the run's status."""

    class View(HostAgentView):
        @extend_schema(tags=TAG, summary=summary, request=None, responses={200: wire.RunStatus})
        def post(self, request, trial_id: int, run_id: int):
            return _run_status(service(self.host, trial_id, run_id))

    View.post.__doc__ = doc
    return View


RunRunningView = _run_report(
    agent.run_running, "A run's process started", "STARTING becomes RUNNING."
)
RunHeartbeatView = _run_report(
    agent.run_heartbeat,
    "Heartbeat a run",
    "The run's host is alive; the answer's stop_requested says whether to stop it.",
)
RunPreemptView = _run_report(
    agent.run_preempt,
    "Preempt a run (host shutdown)",
    "Ask the run to checkpoint and stop so it resumes elsewhere (its trial stays ACTIVE).",
)


class RunExitView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Report a run's exit",
        request=bodies.RunExitRequestSerializer,
        responses={200: wire.RunStatus},
    )
    def post(self, request, trial_id: int, run_id: int):
        """The lifecycle decides what is next (completed, re-queued, restarted, error)."""
        data = self.body(bodies.RunExitRequestSerializer)
        return _run_status(
            agent.run_exit(
                self.host, trial_id, run_id, exit_code=data["exit_code"], reason=data["reason"]
            )
        )


class RunLogsView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Append a run's output lines",
        request=bodies.LogBatchRequestSerializer,
        responses={200: wire.LogsAccepted},
    )
    def post(self, request, trial_id: int, run_id: int, node_rank: int = 0):
        """Lines become the trial's logs (NUL-free, cut at HEADWAY_MAX_LOG_LINE_CHARS); a line
        at or below the highest position stored for the run (or share) is skipped (a resend)."""
        lines = self.body(bodies.LogBatchRequestSerializer)["lines"]
        count = agent.append_logs(
            self.host,
            trial_id,
            run_id,
            [(line["message"], line["timestamp"], line["position"]) for line in lines],
            node_rank=node_rank,
        )
        return answer(wire.LogsAccepted, {"accepted": count})


class RunRendezvousView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Publish a run's rendezvous (chief)",
        request=bodies.RendezvousRequestSerializer,
        responses={200: wire.Rendezvous},
    )
    def post(self, request, trial_id: int, run_id: int):
        """The chief's host tells the run's other hosts where to meet."""
        data = self.body(bodies.RendezvousRequestSerializer)
        return answer(
            wire.Rendezvous, agent.run_publish_rendezvous(self.host, trial_id, run_id, **data)
        )


class RunSharesView(HostAgentView):
    @extend_schema(
        tags=TAG, summary="A run's shares (chief)", responses={200: wire.ShareStatusList}
    )
    def get(self, request, trial_id: int, run_id: int):
        """The other hosts' parts: state, exit code, last heartbeat."""
        shares = agent.run_shares(self.host, trial_id, run_id)
        return answer(wire.ShareStatusList, {"shares": shares})


# -- this host's share of a run over several hosts ----------------------------------------------


class ShareClaimView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Claim this host's share of a run",
        request=bodies.ClaimRequestSerializer,
        responses={200: wire.Claim},
    )
    def post(self, request, trial_id: int, run_id: int, node_rank: int):
        """One delivery of a share's task gets ``claimed: true``."""
        worker = self.body(bodies.ClaimRequestSerializer)["worker"]
        claimed = agent.share_claim(self.host, trial_id, run_id, node_rank, worker=worker)
        return answer(wire.Claim, {"claimed": claimed})


class ShareSpecView(HostAgentView):
    @extend_schema(tags=TAG, summary="A share's launch spec", responses={200: wire.LaunchSpec})
    def get(self, request, trial_id: int, run_id: int, node_rank: int):
        """As a run's, with this share's slots and devices."""
        spec = agent.launch_spec(self.host, trial_id, run_id, node_rank)
        return answer(wire.LaunchSpec, spec)


class ShareModelDefinitionView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="A share's model definition (tar.gz)",
        responses={(200, "application/gzip"): bytes},
    )
    def get(self, request, trial_id: int, run_id: int, node_rank: int):
        """The experiment's model definition archive, as uploaded."""
        archive = agent.model_definition(self.host, trial_id, run_id, node_rank)
        return HttpResponse(archive, content_type="application/gzip")


class ShareTokenView(HostAgentView):
    @extend_schema(tags=TAG, summary="A share's run token", responses={200: wire.RunToken})
    def get(self, request, trial_id: int, run_id: int, node_rank: int):
        """The run's token, for this host's ranks."""
        token = agent.share_token(self.host, trial_id, run_id, node_rank)
        return answer(wire.RunToken, {"token": token})


class ShareRendezvousView(HostAgentView):
    @extend_schema(tags=TAG, summary="A share's rendezvous", responses={200: wire.Rendezvous})
    def get(self, request, trial_id: int, run_id: int, node_rank: int):
        """Where to meet once the chief published it (``ready``); heartbeats the share."""
        plan = agent.share_rendezvous(self.host, trial_id, run_id, node_rank)
        return answer(wire.Rendezvous, plan)


def _share_report(service: Any, summary: str, doc: str) -> type[HostAgentView]:
    """A bodiless POST on a share that calls ``service`` and answers the share's status."""

    class View(HostAgentView):
        @extend_schema(tags=TAG, summary=summary, request=None, responses={200: wire.RunStatus})
        def post(self, request, trial_id: int, run_id: int, node_rank: int):
            return _share_status(service(self.host, trial_id, run_id, node_rank))

    View.post.__doc__ = doc
    return View


ShareRunningView = _share_report(
    agent.share_running, "A share's processes started", "STARTING becomes RUNNING."
)
ShareHeartbeatView = _share_report(
    agent.share_heartbeat,
    "Heartbeat a share",
    "The share's host is alive; the answer carries the run's state and stop request.",
)


class ShareExitView(HostAgentView):
    @extend_schema(
        tags=TAG,
        summary="Report a share's exit",
        request=bodies.ExitRequestSerializer,
        responses={200: wire.RunStatus},
    )
    def post(self, request, trial_id: int, run_id: int, node_rank: int):
        """The chief's host sees it (``shares/``) and decides the run's exit."""
        code = self.body(bodies.ExitRequestSerializer)["exit_code"]
        share = agent.share_exit(self.host, trial_id, run_id, node_rank, exit_code=code)
        return _share_status(share)
