"""Re-attaching runs after the host agent's restart (workers/reattach.py): the state file and
the identity takeover (``workers.agent_state``), the output tail that resumes at the delivered
offset, the guard that waits for a new agent and records the trial's exit, and the offsets a
log batch delivers. Real processes and files; the integration test is
e2e_tests/workers/test_agent_reattach.py."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from headway.exec import procs
from headway.exec.loglines import clean_line
from tests.helpers import REPO, process_alive, wait_for
from workers import agent_state, leases, link, reattach, run_loop
from workers.config import settings


@pytest.fixture
def var_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "VAR_DIR", tmp_path / "var")
    monkeypatch.setattr(settings, "HEADWAY_HOST_NAME", "reattach-host")
    agent_state.reset()
    yield tmp_path / "var"
    agent_state.reset()


def _ended_process() -> tuple[int, int]:
    """A ``(pid, start)`` naming a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procs.process_start(proc.pid)
    proc.wait()
    return proc.pid, start or 1


def _write_state(pid: int, start: int, runs: dict | None = None) -> None:
    agent_state.path().parent.mkdir(parents=True, exist_ok=True)
    body = {"agent_id": "old-agent", "pid": pid, "start": start, "runs": runs or {}}
    agent_state.path().write_text(json.dumps(body))


def test_process_start_names_a_process_for_good():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = procs.process_start(proc.pid)
        assert start is not None and procs.is_alive(proc.pid, start)
        assert not procs.is_alive(proc.pid, start + 1)  # a later holder of the same pid
    finally:
        proc.kill()
        proc.wait()
    assert not procs.is_alive(proc.pid, start)


def test_without_a_state_file_the_agent_keeps_its_fresh_id(var_dir):
    assert agent_state.claim("fresh") == ("fresh", [])
    saved = json.loads(agent_state.path().read_text())
    assert saved["agent_id"] == "fresh" and saved["pid"] == os.getpid()
    assert saved["start"] == procs.process_start(os.getpid())


def test_a_restarted_agent_takes_over_a_dead_agents_id_and_runs(var_dir):
    pid, start = _ended_process()
    run = {"trial_id": 7, "run_id": 2, "pid": 123, "start": 456, "run_dir": "/r", "offset": 99}
    _write_state(pid, start, {"7-2": run})
    agent_id, runs = agent_state.claim("fresh")
    assert agent_id == "old-agent"
    assert runs == [agent_state.RunEntry(**run)]
    saved = json.loads(agent_state.path().read_text())
    assert saved["pid"] == os.getpid() and saved["runs"] == {"7-2": run}
    # What this agent records from now on lands in the same file.
    agent_state.delivered(7, 2, 150)
    agent_state.delivered(7, 2, 120)  # never backwards
    assert json.loads(agent_state.path().read_text())["runs"]["7-2"]["offset"] == 150
    agent_state.remove_run(7, 2)
    assert json.loads(agent_state.path().read_text())["runs"] == {}


def test_a_second_agent_never_takes_a_live_agents_identity_nor_its_file(var_dir):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _write_state(live.pid, procs.process_start(live.pid) or 0, {})
        before = agent_state.path().read_text()
        assert agent_state.claim("fresh") == ("fresh", [])
        assert agent_state.path().read_text() == before
        assert not agent_state.active()  # it records nothing (the master refuses it)
    finally:
        live.kill()
        live.wait()


def test_an_unreadable_state_file_is_ignored(var_dir):
    agent_state.path().parent.mkdir(parents=True)
    agent_state.path().write_text("{not json")
    assert agent_state.claim("fresh") == ("fresh", [])


def test_the_tail_resumes_at_an_offset_and_waits_for_a_whole_line(tmp_path):
    output = tmp_path / "output.log"
    output.write_bytes(b"one\ntwo\nthr")
    ended = threading.Event()
    lines: queue.Queue[object] = queue.Queue()
    thread = threading.Thread(
        target=reattach.tail, args=(output, 4, ended.is_set, lines, 100), daemon=True
    )
    thread.start()
    assert lines.get(timeout=10) == ("two", 8)
    time.sleep(0.3)
    assert lines.empty()  # "thr" is half a line while the process runs
    with open(output, "ab") as stream:
        stream.write(b"ee\nfour \xff")
    assert lines.get(timeout=10) == ("three", 14)
    ended.set()  # the process ended: its last unended line is a line
    assert lines.get(timeout=10) == ("four \ufffd", 20)
    assert lines.get(timeout=10) is run_loop.EOF
    thread.join(10)


def test_the_tail_cuts_an_overlong_line_as_the_pipe_does(tmp_path):
    output = tmp_path / "output.log"
    output.write_bytes(b"a" * 500 + b"\nnext\n")
    lines: queue.Queue[object] = queue.Queue()
    reattach.tail(output, 0, lambda: True, lines, 10)
    (cut, offset) = lines.get_nowait()
    assert cut == clean_line("a" * 500, 10) and cut.endswith(" characters cut]")
    assert offset == 501
    assert lines.get_nowait() == ("next", 506)
    assert lines.get_nowait() is run_loop.EOF


def test_the_tail_of_a_missing_output_ends_at_once(tmp_path):
    lines: queue.Queue[object] = queue.Queue()
    reattach.tail(tmp_path / "gone" / "output.log", 0, lambda: False, lines, 100)
    assert lines.get_nowait() is run_loop.EOF


def test_a_run_that_ended_and_was_cleaned_up_is_only_forgotten(var_dir, tmp_path, monkeypatch):
    """The previous agent reported exit 0 and removed the run's folder, then died before it
    forgot the run: the successor calls nobody and drops the entry."""
    pid, start = _ended_process()
    run = {"trial_id": 4, "run_id": 1, "pid": pid, "start": start, "run_dir": str(tmp_path / "x")}
    _write_state(*_ended_process(), {"4-1": run})
    _agent_id, runs = agent_state.claim("fresh")
    monkeypatch.setattr(link, "api", None)  # any call to the master would fail here
    monkeypatch.setattr(leases, "_held", {})
    (held,) = reattach.hold(runs)
    assert [lease.run_id for lease in leases.held()] == [1]
    reattach.start([held])[0].join(30)
    assert leases.held() == []
    assert json.loads(agent_state.path().read_text())["runs"] == {}


def test_a_batch_sends_its_offsets_and_reports_the_last_delivered(monkeypatch):
    sent = []

    class Master:
        def run_logs(self, trial_id, run_id, batch):
            sent.append([(message, position) for message, _, position in batch])

    monkeypatch.setattr(link, "api", Master)
    delivered = []
    writer = run_loop.LogWriter(3, 1, on_delivered=delivered.append)
    writer.add("a", position=2)
    writer.add("[headway] a line of the agent's own")
    writer.add("b", position=4)
    writer.flush()
    # Each line of the output goes with its offset (its idempotency key for the master).
    assert sent == [[("a", 2), ("[headway] a line of the agent's own", None), ("b", 4)]]
    assert delivered == [4]
    writer.add("[headway] no offset")
    writer.flush()
    assert delivered == [4]


# -- the guard -----------------------------------------------------------------------------------

STAND_IN_AGENT = textwrap.dedent(
    """
    import os, subprocess, sys
    from headway.exec import procs
    run_dir, reattach, trial = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(os.path.join(run_dir, "agent"), "w") as fh:
        fh.write(f"{os.getpid()} {procs.process_start(os.getpid())}")
    with open(os.path.join(run_dir, "output.log"), "ab") as out:
        guard = subprocess.Popen(
            [sys.executable, "-m", "headway.exec.guard", "--parent", str(os.getpid()),
             "--grace", "2", "--interval", "0.2", "--agent-file", os.path.join(run_dir, "agent"),
             "--reattach", reattach, "--exit-file", os.path.join(run_dir, "exit.json"),
             "--", sys.executable, "-c", trial],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    print(guard.pid, procs.process_start(guard.pid), flush=True)
    import time; time.sleep(600)
    """
)

# Prints a numbered line every 0.1 s until the file "go" exists, then exits 3.
TRIAL = textwrap.dedent(
    """
    import os, time
    i = 0
    while not os.path.exists("go"):
        print(f"line {i}", flush=True)
        i += 1
        time.sleep(0.1)
    raise SystemExit(3)
    """
)


def _orphan_a_trial(run_dir, reattach_s: float):
    """A stand-in agent starts the trial under its guard, then is SIGKILLed; returns the
    guard's ``AdoptedProcess``."""
    run_dir.mkdir()
    agent = subprocess.Popen(
        [sys.executable, "-c", STAND_IN_AGENT, str(run_dir), str(reattach_s), TRIAL],
        stdout=subprocess.PIPE,
        text=True,
        cwd=run_dir,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    pid, start = (int(x) for x in agent.stdout.readline().split())
    wait_for(lambda: (run_dir / "output.log").stat().st_size > 0, 30, "the trial's output")
    agent.kill()
    agent.wait()
    return reattach.AdoptedProcess(pid, start, run_dir)


def test_the_guard_keeps_a_trial_a_new_agent_re_attached_and_records_its_exit(tmp_path):
    run_dir = tmp_path / "run"
    process = _orphan_a_trial(run_dir, reattach_s=3)
    reattach.name_agent(run_dir)  # this process re-attaches it
    # Well past the window: still running, and its output still lands in the file.
    size = (run_dir / "output.log").stat().st_size
    time.sleep(5)
    assert process.poll() is None
    assert (run_dir / "output.log").stat().st_size > size
    (run_dir / "go").touch()
    assert process.wait() == 3
    assert process.stopped == ""
    numbers = [
        int(line.split()[1])
        for line in (run_dir / "output.log").read_text().splitlines()
        if line.startswith("line ")
    ]
    assert numbers == list(range(len(numbers)))  # no line lost while it had no agent


def test_the_guard_stops_a_trial_no_agent_re_attached_within_the_window(tmp_path):
    run_dir = tmp_path / "run"
    process = _orphan_a_trial(run_dir, reattach_s=1)
    wait_for(lambda: process.poll() is not None, 30, "the orphaned trial to stop")
    assert "no agent re-attached the run within 1 s" in process.stopped
    assert not process_alive(process.pid)
