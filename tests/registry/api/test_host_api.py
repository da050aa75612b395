"""A worker host's life over the host agent routes, through ``RegistryAPI``, on a live server:
register and heartbeat, claim a run the real scheduler placed on it, get
its launch spec, model definition and run token, stream its output and report its exit; the
registry's trial, run and logs then say so. Also a run over two hosts (shares, rendezvous).

Real PostgreSQL (``DATABASE_URL``) and a real server thread (pytest-django's ``live_server``);
writes commit, so placement runs on commit as in production (tasks go to an unconsumed queue).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from headway.client import BadRequestError, RegistryAPI, UnauthenticatedError
from headway.expconf import config_json
from registry import lifecycle
from registry.models import RunShare, RunState, State, TrialLog, TrialRun, WorkerHost
from tests.helpers import TINY_CONFIG, TINY_MODEL, reload
from tests.host_api_helpers import beat, host_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("host-api-owner")


def _submit(owner, slots: int = 1):
    config = TINY_CONFIG + f"resources: {{slots_per_trial: {slots}}}\n"
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    )
    return experiment, experiment.trials.get()


def _run(trial) -> TrialRun:
    return TrialRun.objects.select_related("host").get(trial=trial, run_id=reload(trial).run_id)


def test_a_host_runs_a_placed_trial_over_rest(live_server, owner) -> None:
    api = host_api(live_server, "hx-a")
    experiment, trial = _submit(owner)
    run = _run(trial)
    assert run.host is not None and run.host.name == "hx-a"  # placed by the real scheduler
    ids = (trial.id, run.run_id)

    assert api.run_claim(*ids, worker="hx-a:1").claimed
    assert not api.run_claim(*ids, worker="hx-a:2").claimed  # a duplicate delivery
    # The same claim sent again (its answer was lost) is still this claimer's.
    assert api.run_claim(*ids, worker="hx-a:1").claimed
    spec = api.run_spec(*ids)
    assert (spec.experiment_id, spec.trial_id, spec.run_id) == (experiment.id, *ids)
    assert spec.hparams == reload(trial).hparams and spec.trial_seed == trial.seed
    assert config_json(spec.experiment_config) == experiment.config
    assert (spec.slots, spec.devices, spec.gpu, spec.shares) == (1, ["cpu0"], False, [])
    assert spec.latest_checkpoint is None
    archive = api.run_model_definition(*ids)
    assert archive == TINY_MODEL and spec.model_definition_bytes == len(TINY_MODEL)
    token = api.run_token(*ids)
    assert token == _run(trial).token
    # The token is the run's: the SDK's route for this trial takes it.
    sdk = RegistryAPI(live_server.url, token).session
    assert sdk.get(f"trials/{trial.id}/")["id"] == trial.id

    assert api.run_running(*ids).state == RunState.RUNNING
    assert api.run_heartbeat(*ids).stop_requested == ""
    long_line = "y" * (settings.HEADWAY_MAX_LOG_LINE_CHARS + 10)
    accepted = api.run_logs(*ids, ["step 1 loss 0.5", long_line, ""])
    assert accepted.accepted == 3
    lifecycle.trial_kill(trial_id=trial.id)
    assert api.run_heartbeat(*ids).stop_requested == "kill"
    after = api.run_exit(*ids, exit_code=-15)
    assert after.state == RunState.EXITED

    run = _run(trial)
    assert (run.state, run.exit_code, run.worker) == (RunState.EXITED, -15, "hx-a:1")
    assert reload(trial).state == State.CANCELED  # a kill ends CANCELED
    lines = list(
        TrialLog.objects.filter(trial=trial).order_by("id").values_list("message", flat=True)
    )
    assert lines[0] == "step 1 loss 0.5" and lines[2] == ""
    assert len(lines[1]) <= settings.HEADWAY_MAX_LOG_LINE_CHARS and lines[1].endswith("cut]")
    # The user's view of the logs is the same.
    user_logs = RegistryAPI(live_server.url, _user_key(owner)).session.get(
        f"trials/{trial.id}/logs/"
    )
    assert [entry["message"] for entry in user_logs["results"]][:1] == ["step 1 loss 0.5"]
    # An exited run's token is no longer handed out; a repeated exit report changes nothing.
    with pytest.raises(UnauthenticatedError) as refused:
        api.run_token(*ids)
    assert refused.value.status == 403
    assert api.run_exit(*ids, exit_code=0).state == RunState.EXITED
    assert _run(trial).exit_code == -15


def test_exit_zero_completes_and_a_lost_exit_requeues(live_server, owner) -> None:
    api = host_api(live_server, "hx-b")
    _, done = _submit(owner)
    api.run_claim(done.id, 1, worker="w")
    api.run_running(done.id, 1)
    api.run_exit(done.id, 1, exit_code=0)
    assert reload(done).state == State.COMPLETED

    _, lost = _submit(owner)
    api.run_claim(lost.id, 1, worker="w")
    api.run_exit(lost.id, 1, exit_code=None)  # stopped by the host: re-queued, no restart
    lost = reload(lost)
    assert (lost.state, lost.run_id, lost.restarts) == (State.ACTIVE, 2, 0)


def test_first_beat_redispatches_and_stopped_takes_the_host_out(live_server, owner) -> None:
    api = host_api(live_server, "hx-c")
    _, trial = _submit(owner)
    assert _run(trial).host.name == "hx-c"
    info = beat(api, "hx-c", redispatch=True)  # a restarted worker: its placed run is resent
    assert (info.name, info.slots, info.devices, info.redispatched) == ("hx-c", 1, ["cpu0"], 1)
    api.host_stopped()
    assert not WorkerHost.objects.get(name="hx-c").alive
    assert _run(trial).host is None  # its unclaimed run moves off it (no other host here)


def test_a_heartbeat_renews_the_leases_of_its_own_runs_only(live_server, owner) -> None:
    api = host_api(live_server, "hx-l")
    _, trial = _submit(owner)
    api.run_claim(trial.id, 1, worker="w")
    # Older than now but well inside any lease (10 s at the least): a cluster worker's reaper
    # sharing this database must not take the run for lost while the test looks at it.
    stale = timezone.now() - timedelta(seconds=3)
    TrialRun.objects.filter(trial=trial).update(heartbeat_at=stale)
    intruder = host_api(live_server, "hx-m")
    assert beat(intruder, "hx-m", runs=[(trial.id, 1)]).renewed == 0  # not placed there
    assert TrialRun.objects.get(trial=trial, run_id=1).heartbeat_at == stale
    assert beat(api, "hx-l", runs=[(trial.id, 1), (trial.id, 7)]).renewed == 1
    assert TrialRun.objects.get(trial=trial, run_id=1).heartbeat_at > stale


def test_a_run_over_two_hosts_meets_through_the_chief(live_server, owner) -> None:
    apis = {name: host_api(live_server, name) for name in ("hx-d", "hx-e")}
    _, trial = _submit(owner, slots=2)
    run = _run(trial)
    share = RunShare.objects.select_related("host").get(run=run)
    chief, other = apis[run.host.name], apis[share.host.name]
    ids = (trial.id, run.run_id)

    assert chief.run_claim(*ids, worker="chief").claimed
    assert other.share_claim(*ids, 1, worker="other").claimed
    assert not other.share_claim(*ids, 1, worker="again").claimed
    assert other.share_claim(*ids, 1, worker="other").claimed  # the same claim, sent again
    waiting = other.share_rendezvous(*ids, 1)
    assert not waiting.ready and waiting.run_state == RunState.STARTING
    # An address is taken as sent, never trimmed: white space in it is refused, naming it.
    with pytest.raises(BadRequestError, match="address"):
        chief.run_rendezvous(*ids, address=" 10.0.0.7", port=29400)
    plan = chief.run_rendezvous(*ids, address="10.0.0.7", port=29400)
    assert (plan.nnodes, plan.node_rank, plan.total_slots) == (2, 0, 2)
    ready = other.share_rendezvous(*ids, 1)
    assert (ready.ready, ready.address, ready.port, ready.node_rank) == (True, "10.0.0.7", 29400, 1)
    spec = other.share_spec(*ids, 1)
    assert (spec.node_rank, spec.slots, spec.run_slots) == (1, 1, 1)
    assert [(p.node_rank, p.host) for p in chief.run_spec(*ids).shares] == [(1, share.host.name)]
    assert other.share_token(*ids, 1) == run.token
    assert other.share_model_definition(*ids, 1) == TINY_MODEL
    assert other.share_running(*ids, 1).share_state == RunState.RUNNING
    assert other.share_heartbeat(*ids, 1).state == RunState.STARTING  # the chief's not started
    other.share_logs(*ids, 1, ["rank 1 up"])
    assert other.share_exit(*ids, 1, exit_code=0).share_state == RunState.EXITED
    watched = chief.run_shares(*ids)
    assert [(s.node_rank, s.state, s.exit_code) for s in watched] == [(1, RunState.EXITED, 0)]
    assert TrialLog.objects.filter(trial=trial, message="rank 1 up").exists()
    # Each host only its own part: the other host cannot act as the chief, nor the chief as
    # the share's host.
    for call in (
        lambda: other.run_claim(*ids, worker="x"),
        lambda: other.run_rendezvous(*ids, address="1.2.3.4", port=1),
        lambda: chief.share_exit(*ids, 1, exit_code=1),
        lambda: chief.share_logs(*ids, 1, ["forged"]),
    ):
        with pytest.raises(UnauthenticatedError) as refused:
            call()
        assert refused.value.status == 403


def _user_key(user) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


def test_an_exit_reason_that_is_not_text_is_refused(live_server, owner) -> None:
    """schemathesis: a number as ``reason`` was stored as its text (DRF's lenient CharField)."""
    api = host_api(live_server, "hx-r")
    _, trial = _submit(owner)
    api.run_claim(trial.id, 1, worker="w")
    path = f"host-agent/trials/{trial.id}/runs/1/exit/"
    with pytest.raises(BadRequestError, match="reason"):
        api.session.post(path, json={"exit_code": 1, "reason": 0.5})
    assert reload(trial).restarts == 0  # nothing was recorded
    assert api.run_exit(trial.id, 1, exit_code=0, reason="done").state == "EXITED"
