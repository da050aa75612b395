"""Supervising trial processes: SIGTERM then SIGKILL to a process group, and worker shutdown.

Real processes in their own sessions (as the runner starts them); each script prints ``ready``
once its signal handling is in place, so no signal can arrive before it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from headway.core._preempt import LISTENING_FILE
from registry import lifecycle
from registry.models import Trial, TrialRun
from tests.helpers import make_tar_gz, process_alive, wait_for
from workers import supervision

pytestmark = pytest.mark.usefixtures("fresh_supervision")

SIGTERM_MESSAGE = "[headway] SIGTERM to the trial's process group"

SLEEPER = "import time; print('ready', flush=True); time.sleep(300)"

# Ignores SIGTERM, as does the child it starts (an ignored signal stays ignored across exec).
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("ready", child.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def spawn():
    """Start ``python -c code`` in its own session, wait for its ``ready`` line; return
    ``(process, words after ready)``. Whatever is left of each group is killed at teardown."""
    started: list[subprocess.Popen] = []

    def start(code: str) -> tuple[subprocess.Popen, list[str]]:
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        started.append(process)
        words = process.stdout.readline().split()
        assert words[:1] == ["ready"], f"{code!r} did not start"
        return process, words[1:]

    yield start
    for process in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()


def test_it_does_nothing_until_scheduled(spawn):
    process, _ = spawn(SLEEPER)
    killer = supervision.ProcessGroupKiller(process, grace=0)
    assert not killer.scheduled
    assert killer.escalate() is None
    assert process.poll() is None


def test_sigterm_stops_a_process_that_obeys_it(spawn):
    process, _ = spawn(SLEEPER)
    killer = supervision.ProcessGroupKiller(process, grace=600)
    killer.schedule()
    assert killer.scheduled
    assert killer.escalate() == SIGTERM_MESSAGE
    assert process.wait(timeout=60) == -signal.SIGTERM
    assert killer.escalate() is None  # SIGKILL only after the grace period
    assert not killer.killed


def test_sigkill_follows_the_grace_period_and_reaches_the_whole_group(spawn):
    process, (child,) = spawn(STUBBORN)
    killer = supervision.ProcessGroupKiller(process, grace=0.2)
    killer.schedule()
    assert killer.escalate() == SIGTERM_MESSAGE
    assert process.poll() is None and process_alive(int(child))  # both ignore SIGTERM
    message = wait_for(killer.escalate, 60, "SIGKILL", interval=0.05)
    assert message == "[headway] still running 0.2 s after SIGTERM: SIGKILL"
    assert killer.killed
    assert process.wait(timeout=60) == -signal.SIGKILL
    wait_for(lambda: not process_alive(int(child)), 60, "the child to die")
    assert killer.escalate() is None  # each signal is sent once


def test_an_earlier_schedule_wins(spawn):
    later_first, _ = spawn(SLEEPER)
    killer = supervision.ProcessGroupKiller(later_first, grace=600)
    killer.schedule(delay=600)
    assert killer.escalate() is None  # not due yet
    killer.schedule(delay=0)  # brought forward
    assert killer.escalate() == SIGTERM_MESSAGE
    assert later_first.wait(timeout=60) == -signal.SIGTERM

    now_first, _ = spawn(SLEEPER)
    killer = supervision.ProcessGroupKiller(now_first, grace=600)
    killer.schedule(delay=0)
    killer.schedule(delay=600)  # does not postpone
    assert killer.escalate() == SIGTERM_MESSAGE
    assert now_first.wait(timeout=60) == -signal.SIGTERM


def test_signalling_a_group_that_is_gone_is_harmless():
    process = subprocess.Popen([sys.executable, "-c", ""], start_new_session=True)
    process.wait()
    killer = supervision.ProcessGroupKiller(process, grace=0)
    killer.schedule()
    assert killer.escalate() == SIGTERM_MESSAGE
    assert killer.escalate() == "[headway] still running 0 s after SIGTERM: SIGKILL"


@pytest.fixture
def running_trial(db, django_user_model):
    """Start trials' runs as a worker would (claimed and RUNNING); return ``(trial_id, run_id)``."""
    owner = django_user_model.objects.create_user("supervised")  # no password: no hashing
    source = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 5},
    }

    def start() -> tuple[int, int]:
        experiment = lifecycle.experiment_create(
            owner=owner, config_source=source, model_definition=make_tar_gz({"train.py": ""})
        )
        trial = Trial.objects.get(experiment=experiment)
        assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=1, worker="test")
        lifecycle.trial_run_running(trial_id=trial.id, run_id=1)
        return trial.id, 1

    return start


def _stop_request(trial_id: int, run_id: int) -> str:
    return TrialRun.objects.get(trial_id=trial_id, run_id=run_id).stop_requested


def _listening(work_dir, trial_id: int, run_id: int, folder: str = "") -> None:
    """Create the file the SDK's preemption watcher creates in the run's directory."""
    run_dir = work_dir / f"trial-{trial_id}-run-{run_id}{folder}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / LISTENING_FILE).touch()


def test_a_worker_shutdown_preempts_its_running_trials(spawn, running_trial, settings, tmp_path):
    settings.HEADWAY_WORK_DIR = tmp_path
    assert not supervision.shutting_down.is_set()
    first, second, killed, elsewhere = (running_trial() for _ in range(4))
    lifecycle.trial_kill(trial_id=killed[0])  # a stop request already made wins
    killers = {}
    for trial_run in (first, second, killed):
        _listening(tmp_path, *trial_run)
        process, _ = spawn(SLEEPER)
        killers[trial_run] = supervision.ProcessGroupKiller(process, grace=600)
        supervision.register(*trial_run, killers[trial_run])
    process, _ = spawn(SLEEPER)
    supervision.register(*elsewhere, supervision.ProcessGroupKiller(process, grace=600))
    supervision.unregister(*elsewhere)  # its run ended on this worker already

    assert supervision.preempt_all_runs(grace=600) == 3
    assert supervision.shutting_down.is_set()
    assert _stop_request(*first) == _stop_request(*second) == "preempt"
    assert _stop_request(*killed) == "kill"
    assert _stop_request(*elsewhere) == ""
    for killer in killers.values():
        # The process has the grace period to checkpoint and exit before any signal.
        assert killer.scheduled and killer.escalate() is None
        assert killer.process.poll() is None


def test_a_worker_shutdown_stops_at_once_a_run_that_does_not_watch_for_preemption(
    spawn, running_trial, settings, tmp_path
):
    # Still starting (importing, loading data) or not using the SDK: it could not checkpoint
    # in the grace period, which would only delay the shutdown (issue #27). A share of a
    # multi-host run keeps its grace: the chief's checkpoint may need its ranks.
    settings.HEADWAY_WORK_DIR = tmp_path
    starting, share = running_trial(), running_trial()
    (tmp_path / f"trial-{share[0]}-run-{share[1]}-node-1").mkdir()
    killers = {}
    for trial_run in (starting, share):
        process, _ = spawn(SLEEPER)
        killers[trial_run] = supervision.ProcessGroupKiller(process, grace=600)
        supervision.register(*trial_run, killers[trial_run])

    assert supervision.preempt_all_runs(grace=600) == 2
    assert _stop_request(*starting) == _stop_request(*share) == "preempt"
    assert killers[starting].escalate() == SIGTERM_MESSAGE
    assert killers[starting].process.wait(timeout=60) == -signal.SIGTERM
    assert killers[share].scheduled and killers[share].escalate() is None
    assert killers[share].process.poll() is None


def test_a_worker_shutdown_with_no_running_trials_only_sets_the_flag():
    assert supervision.preempt_all_runs(grace=600) == 0
    assert supervision.shutting_down.is_set()
