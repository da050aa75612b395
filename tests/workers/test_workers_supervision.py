"""Supervising trial processes: SIGTERM then SIGKILL to a process group, and worker shutdown.

Real processes in their own sessions (as the runner starts them); each script prints ``ready``
once its signal handling is in place, so no signal can arrive before it. A worker shutdown asks
the master over REST to preempt each chief part (``api.run_preempt``, the ``host_agent``
fixture: this process as a host of a live server); the master's database says what it recorded.
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
from registry.models import TrialRun
from tests.helpers import process_alive, reload, submit_single_trial, wait_for
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

# A launcher like torchrun: it starts its "rank" in a session of its own (torch elastic's
# start_new_session=True), and both ignore SIGTERM.
LAUNCHER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                        start_new_session=True)
print("ready", rank.pid, flush=True)
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


def test_sigkill_reaches_ranks_a_launcher_started_in_sessions_of_their_own(spawn):
    process, (rank,) = spawn(LAUNCHER)
    assert os.getpgid(int(rank)) != process.pid  # out of the trial's group
    killer = supervision.ProcessGroupKiller(process, grace=0.2)
    killer.schedule()
    assert killer.escalate() == SIGTERM_MESSAGE
    assert process_alive(int(rank))  # it ignores SIGTERM
    wait_for(killer.escalate, 60, "SIGKILL", interval=0.05)
    assert process.wait(timeout=60) == -signal.SIGKILL
    wait_for(lambda: not process_alive(int(rank)), 60, "the rank to die")


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
def running_trial(host_agent, django_user_model):
    """Start trials' runs on this process's host as its worker would (placed here by the
    scheduler, claimed and RUNNING over REST); return ``(trial_id, run_id)``."""
    owner = django_user_model.objects.create_user("supervised")  # no password: no hashing
    host_agent.register(slots=4)

    def start() -> tuple[int, int]:
        trial = submit_single_trial(owner)
        ids = (trial.id, reload(trial).run_id)
        assert TrialRun.objects.get(trial_id=trial.id, run_id=ids[1]).host.name == host_agent.name
        assert host_agent.api.run_claim(*ids, worker="test").claimed
        host_agent.api.run_running(*ids)
        return ids

    return start


def _stop_request(trial_id: int, run_id: int) -> str:
    return TrialRun.objects.get(trial_id=trial_id, run_id=run_id).stop_requested


def _listening(work_dir, trial_id: int, run_id: int, folder: str = "") -> None:
    """Create the file the SDK's preemption watcher creates in the run's directory."""
    run_dir = work_dir / f"trial-{trial_id}-run-{run_id}{folder}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / LISTENING_FILE).touch()


def test_a_worker_shutdown_preempts_its_running_trials(spawn, running_trial, host_agent):
    tmp_path = host_agent.work_dir  # the agent's HEADWAY_WORK_DIR
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
    spawn, running_trial, host_agent
):
    # Still starting (importing, loading data) or not using the SDK: it could not checkpoint
    # in the grace period, which would only delay the shutdown. A share of a
    # multi-host run keeps its grace: the chief's checkpoint may need its ranks.
    tmp_path = host_agent.work_dir
    tmp_path.mkdir(parents=True, exist_ok=True)
    starting, chief = running_trial(), running_trial()
    (tmp_path / f"trial-{chief[0]}-run-{chief[1]}-node-1").mkdir()
    killers = {}
    for trial_run in (starting, chief):
        process, _ = spawn(SLEEPER)
        killers[trial_run] = supervision.ProcessGroupKiller(process, grace=600)
        supervision.register(*trial_run, killers[trial_run])

    assert supervision.preempt_all_runs(grace=600) == 2
    assert _stop_request(*starting) == _stop_request(*chief) == "preempt"
    assert killers[starting].escalate() == SIGTERM_MESSAGE
    assert killers[starting].process.wait(timeout=60) == -signal.SIGTERM
    assert killers[chief].scheduled and killers[chief].escalate() is None
    assert killers[chief].process.poll() is None


def test_a_worker_shutdown_asks_the_master_only_for_chief_parts(spawn, running_trial, host_agent):
    """A share (``node_rank`` >= 1) this host runs of another host's run follows the chief,
    whose host asks the master: no preempt call for it here; it keeps its grace (its ranks may
    be needed by the chief's checkpoint). Its entry is its own: unregistering it leaves the
    chief's part of the same run registered."""
    tmp_path = host_agent.work_dir
    chief, shared = running_trial(), running_trial()
    (tmp_path / f"trial-{shared[0]}-run-{shared[1]}-node-1").mkdir(parents=True)
    share_process, _ = spawn(SLEEPER)
    share_killer = supervision.ProcessGroupKiller(share_process, grace=600)
    supervision.register(*shared, share_killer, node_rank=1)
    chief_process, _ = spawn(SLEEPER)
    supervision.register(*chief, supervision.ProcessGroupKiller(chief_process, grace=600))
    supervision.register(*chief, supervision.ProcessGroupKiller(chief_process, grace=600), 1)
    supervision.unregister(*chief, node_rank=1)  # the share ended; the chief's part runs on

    assert supervision.preempt_all_runs(grace=600) == 2
    assert _stop_request(*chief) == "preempt"
    assert _stop_request(*shared) == ""  # its chief's host asks for it
    assert share_killer.scheduled and share_killer.escalate() is None
    assert share_process.poll() is None


def test_a_run_the_master_refuses_to_preempt_is_still_stopped(spawn, host_agent, caplog):
    """A run this host cannot ask about (the master answers 403/404: not placed here) is
    logged and still stopped at once: the shutdown never waits on the master."""
    process, _ = spawn(SLEEPER)
    killer = supervision.ProcessGroupKiller(process, grace=600)
    supervision.register(987654, 1, killer)
    assert supervision.preempt_all_runs(grace=600) == 1
    assert "could not ask trial 987654 run 1 to stop" in caplog.text
    assert killer.escalate() == SIGTERM_MESSAGE
    assert process.wait(timeout=60) == -signal.SIGTERM


def test_a_worker_shutdown_with_no_running_trials_only_sets_the_flag():
    assert supervision.preempt_all_runs(grace=600) == 0
    assert supervision.shutting_down.is_set()


@pytest.mark.parametrize(("batch_job_node", "usr1"), [(None, "SIG_DFL"), ("1", "SIG_IGN")])
def test_a_batch_job_nodes_trial_processes_start_with_usr1_ignored(
    monkeypatch, batch_job_node, usr1
):
    # workers.slurm_node sets the variable: the scheduler's USR1 warning is the node process's.
    monkeypatch.delenv(supervision.BATCH_JOB_NODE, raising=False)
    if batch_job_node:
        monkeypatch.setenv(supervision.BATCH_JOB_NODE, batch_job_node)
    code = "import signal; print(signal.getsignal(signal.SIGUSR1).name)"
    done = subprocess.run(
        supervision.guarded([sys.executable, "-c", code]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == usr1
