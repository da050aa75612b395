"""Security review finding: "after a worker is killed its trial runs unsupervised for 60-90 s".

Every trial now runs under ``headway.exec.guard``, which stops the run's process group within
about a second of its worker's death. These are the guard's tests, against real processes; the
integration test (e2e_tests/workers/test_faults_worker_death.py, which imports the helpers below)
SIGKILLs a real host agent (``tests.helpers.start_worker``) in the middle of a trial and waits
for every process of the trial to be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headway.exec import procs
from tests.helpers import REPO, wait_for

FIXTURE = REPO / "tests" / "fixtures" / "core_api"


def _group_members(pgid: int) -> list[int]:
    """Pids of the live (not zombie) processes of process group ``pgid`` (from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _guard(*command: str, parent: int | None = None, grace: float = 3) -> list[str]:
    return [
        sys.executable, "-m", "headway.exec.guard",
        "--parent", str(parent if parent is not None else os.getpid()),
        "--grace", str(grace), "--interval", "0.2", "--", *command,
    ]  # fmt: skip


@pytest.mark.parametrize("code", [0, 3, -signal.SIGKILL])
def test_finding_worker_death_guard_keeps_the_trials_exit_status(code):
    trial = f"import os; os.kill(os.getpid(), {-code})" if code < 0 else f"raise SystemExit({code})"
    done = subprocess.run(_guard(sys.executable, "-c", trial), timeout=60)
    assert done.returncode == code


def test_finding_worker_death_guard_ends_like_a_trial_killed_by_a_signal():
    trial = subprocess.Popen(
        _guard(sys.executable, "-c", "import time; time.sleep(600)"), start_new_session=True
    )
    wait_for(lambda: len(_group_members(trial.pid)) == 2, 30, "the trial under its guard")
    os.killpg(trial.pid, signal.SIGTERM)  # what the worker's kill does
    assert trial.wait(timeout=30) == -signal.SIGTERM


def test_finding_worker_death_guard_stops_the_trial_when_its_parent_dies(tmp_path):
    """A stand-in worker starts a trial (which ignores SIGTERM) under the guard, then is
    SIGKILLed: the trial's whole process group is gone soon after (SIGTERM, then SIGKILL)."""
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    worker_code = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        command = {_guard(sys.executable, "-c", stubborn, parent=-1, grace=2)!r}
        command[command.index("--parent") + 1] = str(os.getpid())
        trial = subprocess.Popen(command, start_new_session=True)
        print(trial.pid, flush=True)
        time.sleep(600)
        """
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", worker_code], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    group = int(worker.stdout.readline())
    wait_for(lambda: len(_group_members(group)) == 2, 30, "the trial under its guard")
    worker.kill()
    worker.wait()
    wait_for(lambda: not _group_members(group), 15, "the orphaned trial to stop")


def test_ranks_a_dead_launcher_left_behind_end_with_the_trial(tmp_path):
    """torchrun's ranks run in sessions of their own: when the launcher dies first they are
    re-parented to the guard (their subreaper), which stops them before it exits, so none runs
    on unsupervised holding the trial's output open."""
    ready = tmp_path / "rank.pid"
    launcher = textwrap.dedent(
        f"""
        import subprocess, sys
        rank = subprocess.Popen(
            [sys.executable, "-c",
             "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
            start_new_session=True,
        )
        open({str(ready)!r}, "w").write(str(rank.pid))
        sys.exit(5)
        """
    )
    done = subprocess.run(
        _guard(sys.executable, "-c", launcher, grace=1),
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=60,
    )
    assert done.returncode == 5  # the trial's own exit status, as before
    assert "outlived it" in done.stderr
    rank = int(ready.read_text())
    wait_for(lambda: procs.process_start(rank) is None, 15, "the orphaned rank to stop")


def _children(pid: int) -> list[int]:
    """Pids of ``pid``'s children (each thread's ``children`` file: the threads pool's task
    threads start the trials)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return sorted(found)
