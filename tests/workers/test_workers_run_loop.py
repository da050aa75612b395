"""The host agent's loop around a running trial: kills, the worker's shutdown, heartbeats and
the batching of output lines (``workers.run_loop``), with real processes and the live server.

``run_trial`` runs in the test's thread as the ``host_agent`` fixture's host (see
test_workers_runner.py); ``while_supervised`` stands in for a user or the worker's shutdown
acting while the process runs. A kill request reaches the host in a run heartbeat's answer.
"""

from __future__ import annotations

import io
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import datetime

import pytest

from headway.client import RegistryAPI
from registry import lifecycle
from registry.models import RunState, State, Trial, TrialRun
from tests.helpers import make_tar_gz, process_alive, wait_for
from tests.helpers_agent import configure_agent, log_lines, trial_on_agent
from workers import reattach, run_loop, runner, supervision

pytestmark = pytest.mark.usefixtures("fresh_supervision")

LONG_AGO = datetime.fromisoformat("2001-01-01T00:00:00+00:00")

# Ignores SIGTERM, as does the child it starts (an ignored signal stays ignored across exec);
# writes both pids once that is in place, then sleeps.
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open("pids.tmp", "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
os.rename("pids.tmp", "pids")
print("stubborn and ready", flush=True)
time.sleep(300)
"""

# The run heartbeat's answer carries a kill request: sent often in the tests that kill.
KILL_NOTICED = {"HEADWAY_STOP_POLL_SECONDS": 0.05}


@pytest.fixture
def agent(host_agent):
    """This process as the live server's host agent, with the tests' timing."""
    configure_agent()
    return host_agent


@pytest.fixture
def submit(agent, django_user_model):
    """Create an experiment with a shell ``entrypoint``, its run placed on the agent's host;
    return its one trial."""
    owner = django_user_model.objects.create_user("loop-owner")  # no password: no hashing

    def create(entrypoint: str, **config) -> Trial:
        source = {
            "entrypoint": entrypoint,
            "searcher": {"name": "single", "metric": "loss", "max_length": 5},
            "max_restarts": 0,
            **config,
        }
        return trial_on_agent(agent, owner, source, make_tar_gz({"stubborn.py": STUBBORN}))

    return create


@pytest.fixture
def while_supervised(monkeypatch):
    """Install ``callback(trial_id, run_id, killer)``, called once the runner has started the
    process and registered it for supervision (the run is RUNNING by then)."""

    def install(callback) -> None:
        register = supervision.register

        def register_then_call(trial_id, run_id, killer, node_rank=0):
            register(trial_id, run_id, killer, node_rank)
            callback(trial_id, run_id, killer)

        monkeypatch.setattr(supervision, "register", register_then_call)

    return install


def test_a_kill_request_terminates_the_process_group(submit, while_supervised):
    # SIGTERM is enough: no SIGKILL expected.
    configure_agent(HEADWAY_KILL_GRACE_SECONDS=600.0, **KILL_NOTICED)
    trial = submit("sleep 300")
    while_supervised(lambda trial_id, run_id, killer: lifecycle.trial_kill(trial_id=trial_id))
    assert runner.run_trial(trial.id, 1) == -signal.SIGTERM
    lines = log_lines(trial)
    assert "[headway] kill requested" in lines
    assert "[headway] SIGTERM to the trial's process group" in lines
    assert not any("SIGKILL" in m for m in lines)
    trial.refresh_from_db()
    assert trial.state == State.CANCELED


def test_a_process_tree_that_ignores_sigterm_is_killed_after_the_grace_period(
    submit, agent, while_supervised
):
    configure_agent(**KILL_NOTICED)
    trial = submit("python stubborn.py")
    pids_file = agent.work_dir / f"trial-{trial.id}-run-1" / "code" / "pids"

    def kill_once_stubborn(trial_id, run_id, killer):
        wait_for(pids_file.exists, 60, "the trial process to ignore SIGTERM", interval=0.05)
        lifecycle.trial_kill(trial_id=trial_id)

    while_supervised(kill_once_stubborn)
    try:
        code = runner.run_trial(trial.id, 1)
        pids = [int(pid) for pid in pids_file.read_text().split()]
        # The shell may exec the script (SIGKILL) or wait for it and die of SIGTERM itself.
        assert code in (-signal.SIGKILL, -signal.SIGTERM)
        lines = log_lines(trial)
        assert "stubborn and ready" in lines
        term = lines.index("[headway] SIGTERM to the trial's process group")
        kill = lines.index("[headway] still running 0.5 s after SIGTERM: SIGKILL")
        assert term < kill
        for pid in pids:  # the script and the child it started
            wait_for(lambda pid=pid: not process_alive(pid), 60, f"process {pid} to die")
        trial.refresh_from_db()
        assert trial.state == State.CANCELED
    finally:
        if pids_file.exists():
            for pid in pids_file.read_text().split():
                if process_alive(int(pid)):
                    os.kill(int(pid), signal.SIGKILL)


def test_a_worker_shutdown_requeues_the_trial_without_counting_a_restart(submit, while_supervised):
    trial = submit("sleep 300", max_restarts=0)
    # Grace 0: the process gets SIGTERM at once instead of checkpointing first.
    while_supervised(lambda *_: supervision.preempt_all_runs(grace=0))
    assert runner.run_trial(trial.id, 1) is None
    assert "[headway] run 1 stopped by the worker's shutdown (code -15)" in log_lines(trial)
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert run.exit_code is None and run.stop_requested == "preempt"
    trial.refresh_from_db()
    assert (trial.state, trial.restarts, trial.run_id) == (State.ACTIVE, 0, 2)
    assert TrialRun.objects.get(trial=trial, run_id=2).state == RunState.QUEUED


def test_a_run_delivered_during_the_worker_shutdown_is_left_unclaimed(submit):
    trial = submit("echo ran")
    supervision.shutting_down.set()
    assert runner.run_trial(trial.id, 1) is None
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert (run.state, run.worker) == (RunState.QUEUED, "")
    assert "ran" not in log_lines(trial)


@pytest.mark.parametrize(("interval", "beats"), [(0.0, True), (3600.0, False)])
def test_it_heartbeats_while_the_process_runs(submit, while_supervised, interval, beats):
    configure_agent(HEADWAY_HEARTBEAT_SECONDS=interval)
    trial = submit("echo one; echo two")
    while_supervised(
        lambda trial_id, run_id, killer: TrialRun.objects.filter(
            trial_id=trial_id, run_id=run_id
        ).update(heartbeat_at=LONG_AGO)
    )
    assert runner.run_trial(trial.id, 1) == 0
    heartbeat = TrialRun.objects.get(trial=trial, run_id=1).heartbeat_at
    assert (heartbeat > LONG_AGO) == beats


@pytest.fixture
def log_calls(monkeypatch) -> list[int]:
    """The number of lines of each ``run_logs`` call the host makes (a spy on the real client:
    each call still goes to the live server)."""
    calls: list[int] = []
    send = RegistryAPI.run_logs

    def counted(self, trial_id, run_id, lines):
        lines = list(lines)
        calls.append(len(lines))
        return send(self, trial_id, run_id, lines)

    monkeypatch.setattr(RegistryAPI, "run_logs", counted)
    return calls


def test_a_chatty_process_is_logged_in_few_calls(submit, log_calls):
    configure_agent(HEADWAY_LOG_FLUSH_SECONDS=3600.0)  # only the batch size triggers a call
    trial = submit("python -c 'for i in range(1200): print(i)'")
    assert runner.run_trial(trial.id, 1) == 0
    assert log_lines(trial)[1:-1] == [str(i) for i in range(1200)]
    assert 1 <= len(log_calls) <= 10
    assert sum(log_calls) == 1202 and max(log_calls) <= run_loop.LOG_BATCH


# supervise on its own: lines from a queue instead of a pipe.


def _idle_killer() -> supervision.ProcessGroupKiller:
    """A killer that is never scheduled here; its process has already ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return supervision.ProcessGroupKiller(process, grace=600)


def test_lines_are_written_in_batches_of_500(submit, agent):
    configure_agent(HEADWAY_LOG_FLUSH_SECONDS=3600.0)
    trial = submit("true")
    spec = agent.api.run_spec(trial.id, 1)
    lines: queue.Queue = queue.Queue()
    for i in range(1200):
        lines.put(f"line {i}")
    lines.put(run_loop.EOF)
    writer = run_loop.LogWriter(trial.id, 1)
    run_loop.supervise(spec, _idle_killer(), lines, writer)
    assert log_lines(trial) == [f"line {i}" for i in range(1000)]
    assert [message for message, _ in writer.pending] == [f"line {i}" for i in range(1000, 1200)]


def test_output_held_open_after_the_process_ended_is_read_for_a_bounded_time(
    submit, agent, monkeypatch
):
    # A stray the trial started (out of reach of the kill) keeps its output open: no EOF.
    monkeypatch.setattr(run_loop, "OUTPUT_AFTER_EXIT_S", 0.5)
    trial = submit("true")
    spec = agent.api.run_spec(trial.id, 1)
    lines: queue.Queue = queue.Queue()
    lines.put("last words")
    writer = run_loop.LogWriter(trial.id, 1)
    run_loop.supervise(spec, _idle_killer(), lines, writer)  # returns: the process ended
    writer.flush()
    logged = log_lines(trial)
    assert logged[0] == "last words"
    assert "still hold its output open: no longer read" in logged[-1]


class _RecordingWriter(run_loop.LogWriter):
    """The real writer, also noting in memory what each flush sent (for another thread)."""

    def __init__(self, trial_id: int, run_id: int) -> None:
        super().__init__(trial_id, run_id)
        self.written: list[str] = []

    def flush(self) -> None:
        messages = [message for message, _ in self.pending]
        super().flush()
        self.written += messages


def test_a_quiet_process_lines_are_written_within_the_flush_interval(submit, agent):
    trial = submit("true")  # HEADWAY_LOG_FLUSH_SECONDS: 0.05
    spec = agent.api.run_spec(trial.id, 1)
    lines: queue.Queue = queue.Queue()
    for i in range(3):
        lines.put(f"line {i}")
    writer = _RecordingWriter(trial.id, 1)
    flushed = threading.Event()

    def end_after_the_flush():
        # The lines are written while the process is still running: no EOF before that.
        try:
            wait_for(lambda: len(writer.written) == 3, 60, "a flush", interval=0.01)
            flushed.set()
        finally:
            lines.put(run_loop.EOF)

    producer = threading.Thread(target=end_after_the_flush)
    producer.start()
    run_loop.supervise(spec, _idle_killer(), lines, writer)
    producer.join()
    assert flushed.is_set()
    assert log_lines(trial) == ["line 0", "line 1", "line 2"]


class _AnswerLostOnce:
    """The host's client, whose first log call reaches the master but whose answer is lost."""

    def __init__(self, api) -> None:
        self.api = api
        self.lost = False

    def run_logs(self, trial_id, run_id, batch):
        answer = self.api.run_logs(trial_id, run_id, batch)
        if not self.lost:
            self.lost = True
            raise TimeoutError("the answer was lost")
        return answer


def test_a_batch_whose_answer_was_lost_is_stored_once(submit, agent, monkeypatch):
    trial = submit("true")
    client = _AnswerLostOnce(agent.api)
    monkeypatch.setattr(run_loop.link, "api", lambda: client)
    lines: queue.Queue = queue.Queue()
    run_loop.pump(io.StringIO("line 1\nline 2\n"), lines)
    assert [lines.get() for _ in range(3)] == [("line 1", 1), ("line 2", 2), run_loop.EOF]
    writer = run_loop.LogWriter(trial.id, 1)
    writer.add("line 1", 1)
    writer.add("line 2", 2)
    with pytest.raises(TimeoutError):
        writer.flush()  # stored, but the agent does not know: the lines stay queued
    writer.add("line 3", 3)
    writer.flush()  # sends lines 1-3 again: only line 3 is new
    assert log_lines(trial) == ["line 1", "line 2", "line 3"]
    assert writer.pending == []


def test_a_restarted_agent_re_reading_an_output_file_stores_each_line_once(submit, agent, tmp_path):
    """The first agent's last batch was stored but its offset never reached the state file:
    its successor tails the file from the older offset, and the master skips the prefix."""
    trial = submit("true")
    output = tmp_path / "output.log"
    output.write_text("line 1\nline 2\n")

    def tail_and_send(offset: int) -> list[int]:
        lines: queue.Queue = queue.Queue()
        reattach.tail(output, offset, lambda: True, lines)
        delivered: list[int] = []
        writer = run_loop.LogWriter(trial.id, 1, on_delivered=delivered.append)
        while (item := lines.get()) is not run_loop.EOF:
            writer.add(*item)  # (text, offset past it)
        writer.flush()
        return delivered

    assert tail_and_send(0) == [14]
    with output.open("a") as fh:
        fh.write("line 3\n")
    assert tail_and_send(0) == [21]  # the state file still said 0
    assert log_lines(trial) == ["line 1", "line 2", "line 3"]
