"""Security review finding: "A lost broker message leaves a trial QUEUED forever (the reaper only
looks at started runs)".

The periodic reaper now sends again the task of a placed run no worker claimed within
``HEADWAY_DISPATCH_TIMEOUT_SECONDS`` (``registry.scheduling.redispatch_unclaimed_runs``);
duplicate deliveries are still claimed once.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tests.helpers import REPO, register_host, reload, start_worker, stop_workers, wait_for

FIXTURE = REPO / "tests" / "fixtures" / "core_api"


@pytest.mark.django_db
def test_finding_lost_broker_message_unclaimed_placed_run_is_sent_again(
    trial, monkeypatch, settings
):
    from registry import lifecycle, scheduling
    from registry.models import TrialRun
    from registry.scheduling import _redispatch

    sent: list[tuple] = []
    monkeypatch.setattr(_redispatch, "send_run_task", lambda *args: sent.append(args) or True)
    host = register_host("lonely", 1)
    scheduling.place_queued_runs()
    run = TrialRun.objects.get(trial=trial)
    assert run.host_id == host.id and run.heartbeat_at is not None  # dispatched now
    # Within the timeout nothing is sent again.
    assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(seconds=60)) == []
    # Past it (the message was lost), the task goes to the host's queue again, once per pass.
    assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(0)) == [(trial.id, 1)]
    assert sent == [(trial.id, 1, host.queue)]
    # A claimed run is never sent again; the first claim wins, a duplicate delivery gets None.
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="w1") is not None
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="w2") is None
    assert scheduling.redispatch_unclaimed_runs(timeout=timedelta(0)) == []
    assert reload(run).worker == "w1"


@pytest.mark.integration
@pytest.mark.slow
def test_finding_lost_broker_message_queued_trial_runs_after_redispatch(
    cluster, cluster_api, settings, tmp_path
):
    """The host's worker runs; its queue loses the run's message (consumer paused, queue
    purged); the master's reaper sends it again (the cluster's dispatch timeout, 20 s) and the
    trial runs to completion."""
    from config.celery import app
    from registry.models import TrialRun
    from workers.hosts import host_queue

    pool = f"headway-lost-{uuid.uuid4().hex[:8]}"
    name = f"{pool}-host"
    queue = host_queue(name, pool)
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    env = dict(
        cluster.env,
        HEADWAY_QUEUE=pool,
        HEADWAY_HOST_NAME=name,
        HEADWAY_SLOTS="1",
    )
    # Its own node name: the control commands below must reach this worker alone (a broadcast
    # add_consumer would make every test worker on the broker take this host's messages).
    node = f"{name}@localhost"
    worker = start_worker(env, tmp_path / "worker.log", pool, name, nodename=node)
    try:
        from registry.models import WorkerHost

        wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 60, "the host")
        # The worker stops taking from its host queue: the next message waits there...
        wait_for(
            lambda: app.control.cancel_consumer(queue, destination=[node], reply=True, timeout=2),
            30,
            "the worker to stop consuming its host queue",
        )
        trial = cluster_api.submit(FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5})
        wait_for(
            lambda: TrialRun.objects.filter(trial_id=trial["id"], host__name=name).exists(),
            30,
            "the run to be placed on the host",
        )
        # ...and is lost.
        with app.connection_for_write() as connection:
            wait_for(
                lambda: connection.default_channel.queue_purge(queue),
                30,
                "the run's message to be purged",
            )
        wait_for(
            lambda: app.control.add_consumer(queue, destination=[node], reply=True, timeout=2),
            30,
            "the worker to consume its host queue again",
        )
        try:
            final = cluster_api.wait_trial(
                trial["id"], lambda t: t["state"] == "COMPLETED", "the trial to run", timeout=180
            )
        except pytest.fail.Exception as exc:
            log = (tmp_path / "worker.log").read_text(errors="replace")[-6000:]
            pytest.fail(f"{exc}\n--- the host's worker log (end) ---\n{log}")
        assert final["restarts"] == 0
        run = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
        assert run.worker and run.exit_code == 0
    finally:
        stop_workers([worker])
