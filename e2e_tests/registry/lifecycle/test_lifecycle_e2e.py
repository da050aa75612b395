"""Pause / activate / kill / continue / crash-restart through a real cluster (Celery worker on
Redis, PostgreSQL, the trial processes the worker launches)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import REPO, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIXTURES = REPO / "tests" / "fixtures"
RESUMABLE = FIXTURES / "resumable"
CORE_API = FIXTURES / "core_api"


def trial_process_ids(cluster_api, trial_id: int, run_id: int) -> list[int]:
    """PIDs of processes launched for this run (found by the environment the worker set).

    The master URL is part of the match: with ``-n 2`` another test cluster has trials with the
    same ids at the same time.
    """
    wanted = {
        f"HEADWAY_MASTER={cluster_api.url}".encode(),
        f"HEADWAY_TRIAL_ID={trial_id}".encode(),
        f"HEADWAY_RUN_ID={run_id}".encode(),
    }
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if wanted <= environ:
            pids.append(int(entry.name))
    return pids


def assert_models_bitwise_equal(a: dict, b: dict) -> None:
    for left, right in zip(a["models_state_dict"], b["models_state_dict"], strict=True):
        assert left.keys() == right.keys()
        for key in left:
            assert torch.equal(left[key], right[key]), key


def test_pause_mid_epoch_then_activate_matches_an_uninterrupted_run_bitwise(cluster_api):
    paused = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE)
    reference = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE)
    assert paused["hparams"] == reference["hparams"] and paused["seed"] == reference["seed"]

    # Pause in the middle of the second epoch (44 batches per epoch).
    cluster_api.wait_trial(paused["id"], lambda t: t["steps_completed"] >= 50, "50 batches")
    cluster_api.post(f"trials/{paused['id']}/pause")
    state = cluster_api.wait_trial(
        paused["id"], lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    assert not trial_process_ids(cluster_api, paused["id"], 1), (
        "the paused process must have exited"
    )
    checkpoint = cluster_api.get(f"checkpoints/{state['latest_checkpoint']}/")
    pause_step = checkpoint["steps_completed"]
    assert 50 <= pause_step < 120
    assert pause_step == state["steps_completed"]  # the checkpoint is at the last trained batch

    cluster_api.post(f"trials/{paused['id']}/activate")
    done = cluster_api.wait_trial(paused["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0 and done["steps_completed"] == 120
    uninterrupted = cluster_api.wait_trial(
        reference["id"], lambda t: t["state"] == "COMPLETED", "reference COMPLETED"
    )

    assert_models_bitwise_equal(
        cluster_api.checkpoint_state(done["latest_checkpoint"]),
        cluster_api.checkpoint_state(uninterrupted["latest_checkpoint"]),
    )
    # The curves: no duplicate steps, nothing missing, the same values where both reported.
    steps, _values = cluster_api.series(paused["id"], "training", "loss")
    ref_steps, _ref_values = cluster_api.series(reference["id"], "training", "loss")
    assert steps == sorted(set(steps)) and set(ref_steps) <= set(steps)
    val_steps, val_values = cluster_api.series(paused["id"], "validation", "accuracy")
    ref_val_steps, ref_val_values = cluster_api.series(reference["id"], "validation", "accuracy")
    common = [s for s in ref_val_steps if s in val_steps]
    assert common and common[-1] == 120
    for step in common:
        assert val_values[val_steps.index(step)] == ref_val_values[ref_val_steps.index(step)]


def test_sigkill_restarts_from_the_latest_checkpoint_and_supersedes_metrics(cluster_api):
    trial = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE)
    at_kill = cluster_api.wait_trial(
        trial["id"], lambda t: t["latest_checkpoint"] and t["steps_completed"] >= 45, "a checkpoint"
    )
    for pid in trial_process_ids(cluster_api, trial["id"], 1):
        os.kill(pid, signal.SIGKILL)
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["restarts"] == 1 and done["run_id"] == 2
    logs = cluster_api.logs(trial["id"])
    assert "[headway] run 1 exited with code -9" in logs
    assert at_kill["steps_completed"] >= 45
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    assert steps == sorted(set(steps)) and steps[-1] == 120

    from registry.models import Checkpoint, MetricReport

    # Run 2 restored run 1's latest checkpoint; every report after that step is run 2's (run 1's
    # reports for those steps were superseded), every report up to it is run 1's.
    restored = Checkpoint.objects.filter(trial_id=trial["id"], run_id=1).order_by(
        "-steps_completed"
    )[0]
    rows = MetricReport.objects.filter(trial_id=trial["id"], group="training")
    for step, run_id in rows.values_list("steps_completed", "run_id"):
        assert run_id == (1 if step <= restored.steps_completed else 2), (step, run_id)


def test_sigkill_with_no_restarts_left_is_an_error(cluster_api):
    trial = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE, max_restarts=0)
    cluster_api.wait_trial(
        trial["id"], lambda t: t["run_state"] == "RUNNING" and t["steps_completed"] > 0, "running"
    )
    for pid in trial_process_ids(cluster_api, trial["id"], 1):
        os.kill(pid, signal.SIGKILL)
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "ERROR", "ERROR")
    assert done["restarts"] == 0 and done["run_id"] == 1


def test_kill_ends_a_process_that_ignores_sigterm(cluster_api, tmp_path):
    (tmp_path / "stubborn.py").write_text(
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ignoring SIGTERM', flush=True)\n"
        "while True:\n    time.sleep(0.1)\n"
    )
    (tmp_path / "exp.yaml").write_text(
        "name: stubborn\nentrypoint: python stubborn.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n"
    )
    trial = cluster_api.submit(tmp_path / "exp.yaml", tmp_path)
    wait_for(
        lambda: "ignoring SIGTERM" in cluster_api.logs(trial["id"]), 120, "the process to start"
    )
    requested = time.monotonic()
    cluster_api.post(f"trials/{trial['id']}/kill")
    cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", timeout=30)
    # Grace period is 3 s in the test cluster; allow for polling and process teardown.
    assert time.monotonic() - requested < 15
    assert any("SIGKILL" in line for line in cluster_api.logs(trial["id"])), cluster_api.logs(
        trial["id"]
    )
    assert not trial_process_ids(cluster_api, trial["id"], 1)


def _log_json(lines: list[str], key: str) -> dict:
    return next(json.loads(line) for line in lines if line.startswith("{") and key in line)


def test_core_api_script_pauses_resumes_and_continues(cluster_api):
    trial = cluster_api.submit(CORE_API / "exp.yaml", CORE_API)
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 2, "two epochs")
    cluster_api.post(f"trials/{trial['id']}/pause")
    paused = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    paused_epochs = paused["steps_completed"]
    assert 2 <= paused_epochs < 8
    cluster_api.post(f"trials/{trial['id']}/activate")
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2
    restored = _log_json(cluster_api.logs(trial["id"]), "restored")
    assert restored["start_epoch"] == paused_epochs and restored["from_trial"] == trial["id"]
    steps, epochs = cluster_api.series(trial["id"], "training", "epoch")
    assert steps == list(range(1, 9)) and epochs == list(range(8))
    final = _log_json(cluster_api.logs(trial["id"]), "final_weight_sum")["final_weight_sum"]

    experiment = cluster_api.post(f"trials/{trial['id']}/continue", {"max_length": 3})
    (continued,) = cluster_api.get(f"experiments/{experiment['id']}/trials/")["results"]
    assert continued["warm_start_checkpoint"] == done["latest_checkpoint"]
    finished = cluster_api.wait_trial(
        continued["id"], lambda t: t["state"] == "COMPLETED", "continued"
    )
    warm = _log_json(cluster_api.logs(finished["id"]), "restored")
    assert warm["start_epoch"] == 0 and warm["from_trial"] == trial["id"]
    assert warm["weight_sum"] == pytest.approx(final, abs=1e-6)


def test_concurrent_pause_and_activate_leave_a_consistent_state(cluster_api, cluster):
    trial = cluster_api.submit(CORE_API / "exp.yaml", CORE_API, hyperparameters={"sleep": 2.0})
    errors: list[str] = []

    def toggle(i: int) -> None:
        action = "pause" if i % 2 == 0 else "activate"
        response = cluster_api.http.post(
            f"{cluster.url}/api/v1/trials/{trial['id']}/{action}", timeout=60
        )
        if response.status_code not in (200, 409):
            errors.append(f"{action}: {response.status_code} {response.text}")

    threads = [threading.Thread(target=toggle, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    cluster_api.post(f"trials/{trial['id']}/kill")
    final = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", timeout=60
    )

    from registry.models import RunState, TrialRun

    runs = list(TrialRun.objects.filter(trial_id=trial["id"]).order_by("run_id"))
    assert [r.run_id for r in runs] == list(range(1, final["run_id"] + 1))  # no duplicates, no gaps
    assert all(r.state == RunState.EXITED for r in runs)


@pytest.fixture
def dedicated_workers(cluster, settings, tmp_path):
    """Start workers on a queue of their own, with fast heartbeats and reaping.

    Yields ``start(name) -> Popen``; each worker runs in its own session (so a test can kill the
    worker with its beat child, as when its host dies) and is killed at teardown.
    """
    import subprocess
    import uuid

    from tests.helpers import start_master_worker, start_worker

    queue = f"headway-dedicated-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    timing = {
        "HEADWAY_HEARTBEAT_SECONDS": "0.5",
        "HEADWAY_HEARTBEAT_TIMEOUT_SECONDS": "4",
        "HEADWAY_REAPER_INTERVAL_SECONDS": "1",
        # A bound, not pacing: a preempted trial ends by itself well within it, but on a
        # loaded 2-core CI machine its exit (checkpoint, threads, interpreter) took > 3 s.
        "HEADWAY_KILL_GRACE_SECONDS": "20",
        "HEADWAY_LEASE_MARGIN_SECONDS": "25",
    }
    # The hosts take their kill grace from the master (this process's heartbeat answers).
    settings.HEADWAY_KILL_GRACE_SECONDS = 20.0
    settings.HEADWAY_LEASE_MARGIN_SECONDS = 25.0
    # The master's worker of this queue: the lost-run reaper, every second.
    started: list[subprocess.Popen] = [
        start_master_worker(dict(cluster.env, **timing), tmp_path / "master.log", queue)
    ]

    def start(name: str) -> subprocess.Popen:
        env = dict(cluster.env, HEADWAY_VAR_DIR=str(tmp_path / name), **timing)
        host = f"{queue}-{name}"
        worker = start_worker(env, tmp_path / f"{name}.log", queue, host, concurrency=1)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def test_a_lost_worker_s_trial_is_requeued_and_finished_by_another_worker(
    cluster_api, dedicated_workers
):
    from registry.models import TrialRun

    lost = dedicated_workers("lost")
    trial = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE)
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 10, "training")
    # The worker host vanishes (worker + its beat); the trial process, in a session of its own,
    # is left behind as an orphan.
    os.killpg(lost.pid, signal.SIGKILL)
    lost.wait()
    dedicated_workers("rescuer")
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0  # a lost worker is not the trial's failure
    first = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
    assert first.state == "EXITED" and first.exit_code is None
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    assert steps == sorted(set(steps)) and steps[-1] == 120
    # The orphaned process learns its run is over (should_preempt) and exits by itself.
    wait_for(
        lambda: not trial_process_ids(cluster_api, trial["id"], 1),
        60,
        "the orphaned run 1 process to exit",
    )


def test_a_worker_shutting_down_preempts_its_trial_which_resumes_elsewhere(
    cluster_api, dedicated_workers
):
    from registry.models import TrialRun

    leaving = dedicated_workers("leaving")
    trial = cluster_api.submit(RESUMABLE / "exp.yaml", RESUMABLE)
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 10, "training")
    leaving.terminate()  # warm shutdown, as on a deploy or Ctrl-C
    assert leaving.wait(timeout=60) == 0
    first = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
    assert first.exit_code == 0 and first.preempt_acknowledged  # checkpointed, then stopped
    assert not trial_process_ids(cluster_api, trial["id"], 1)
    dedicated_workers("next")
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    assert steps == sorted(set(steps)) and steps[-1] == 120
