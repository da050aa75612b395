"""Security review finding, worker death: a real worker killed with SIGKILL stops its trial.

The unit tests of the guard are in tests/workers/test_faults_worker_death.py."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid

import pytest

from tests.helpers import process_alive, start_worker, wait_for
from tests.workers.test_faults_worker_death import FIXTURE, _children, _group_members


@pytest.mark.integration
@pytest.mark.slow
def test_finding_worker_death_trial_stops_when_its_worker_is_killed(
    cluster, cluster_api, settings, tmp_path
):
    from registry.models import TrialRun, WorkerHost

    pool = f"headway-death-{uuid.uuid4().hex[:8]}"
    name = f"{pool}-host"
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    # The trial outlives its agent for HEADWAY_REATTACH_SECONDS, waiting for a restarted agent
    # to re-attach it (e2e_tests/workers/test_agent_reattach.py); here none comes.
    env = dict(
        cluster.env,
        HEADWAY_QUEUE=pool,
        HEADWAY_HOST_NAME=name,
        HEADWAY_SLOTS="1",
        HEADWAY_REATTACH_SECONDS="2",
    )
    worker = start_worker(env, tmp_path / "worker.log", pool, name)
    try:
        wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 60, "the host")
        trial = cluster_api.submit(
            FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 30.0}
        )
        cluster_api.wait_trial(trial["id"], lambda t: t["latest_checkpoint"], "training")
        assert TrialRun.objects.get(trial_id=trial["id"], run_id=1).state == "RUNNING"
        # The trial's process group is the guard's: the worker's child in a session of its own.
        guards = [pid for pid in _children(worker.pid) if os.getpgid(pid) == pid]
        assert len(guards) == 1, guards
        group = guards[0]
        assert len(_group_members(group)) >= 2  # the guard and the trial
        os.kill(worker.pid, signal.SIGKILL)  # the worker process only, not its group
        wait_for(lambda: not _group_members(group), 30, "the trial to stop after its worker")
    finally:
        if process_alive(worker.pid):
            worker.kill()
        worker.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)  # the embedded beat
