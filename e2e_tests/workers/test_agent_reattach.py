"""A host agent killed (SIGKILL) and started again re-attaches its running trial: the trial keeps
training, no restart is charged, no run is re-queued, every training step is stored once and
the trial's log has every line, in order, once: the batch in flight at the kill, sent again by
the restarted agent, is skipped at its lines' positions (workers/reattach.py,
registry/lifecycle/_log_batches.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.helpers import process_alive, start_worker, wait_for

STEPS = 60
LINES_PER_STEP = 3

TRAIN = textwrap.dedent(
    f"""
    import time

    import headway as det

    with det.core.init() as core:
        for step in range(1, {STEPS} + 1):
            for line in range({LINES_PER_STEP}):
                print(f"tick {{step}} {{line}}", flush=True)
            core.train.report_training_metrics(steps_completed=step, metrics={{"loss": 1 / step}})
            time.sleep(0.25)
    """
)


def _stop(worker) -> None:
    if process_alive(worker.pid):
        worker.kill()
    worker.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)


@pytest.mark.integration
@pytest.mark.slow
def test_a_restarted_agent_re_attaches_its_running_trial(cluster, cluster_api, settings, tmp_path):
    from registry.models import TrialRun, WorkerHost

    pool = f"headway-reattach-{uuid.uuid4().hex[:8]}"
    name = f"{pool}-host"
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    env = dict(
        cluster.env,
        HEADWAY_QUEUE=pool,
        HEADWAY_HOST_NAME=name,
        HEADWAY_SLOTS="1",
        HEADWAY_REATTACH_SECONDS="30",
    )
    model = tmp_path / "model"
    model.mkdir()
    (model / "train.py").write_text(TRAIN)
    (model / "exp.yaml").write_text(
        "name: reattach\nentrypoint: python train.py\n"
        f"searcher: {{name: single, metric: loss, max_length: {STEPS}}}\nmax_restarts: 0\n"
    )
    first = start_worker(env, tmp_path / "first.log", pool, name)
    workers = [first]
    try:
        wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 60, "the host")
        agent_id = WorkerHost.objects.get(name=name).agent_id
        trial = cluster_api.submit(model / "exp.yaml", model)

        def steps_stored() -> int:
            try:
                return len(cluster_api.series(trial["id"], "training", "loss")[0])
            except ValueError:  # no series yet
                return 0

        # Killed at a moment the trial chooses (its 5th step), not one the agent's log
        # flushes choose, as a crash would be.
        wait_for(lambda: steps_stored() >= 5, 240, "training")
        os.kill(first.pid, signal.SIGKILL)  # the agent only: the trial runs in its own session
        state_at_kill = (Path(env["HEADWAY_VAR_DIR"]) / f"agent-{name}.json").read_text()
        first.wait()
        second = start_worker(env, tmp_path / "second.log", pool, name, token=first.host_token)
        workers.append(second)
        done = cluster_api.wait_trial(
            trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR", "CANCELED"), "the end"
        )
        second_log = (tmp_path / "second.log").read_text()
        assert done["state"] == "COMPLETED", second_log[-3000:]
        assert done["restarts"] == 0
        assert TrialRun.objects.filter(trial_id=trial["id"]).count() == 1
        host = WorkerHost.objects.get(name=name)
        assert host.agent_id == agent_id and host.agent_pid == second.pid  # the same instance
        assert "re-attaching 1 run(s)" in second_log
        steps, _ = cluster_api.series(trial["id"], "training", "loss")
        assert steps == list(range(1, STEPS + 1))
        logs = cluster_api.logs(trial["id"])
        ticks = [line for line in logs if line.startswith("tick ")]
        expected = [f"tick {s} {i}" for s in range(1, STEPS + 1) for i in range(LINES_PER_STEP)]
        # Each line once: a batch the master stored while its answer to the killed agent was on
        # the way is sent again from the older offset, and skipped at its positions.
        assert ticks == expected, state_at_kill
        assert any("re-attached by a restarted agent" in line for line in logs), logs
    finally:
        for worker in workers:
            _stop(worker)
