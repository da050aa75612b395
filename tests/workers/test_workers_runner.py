"""The worker's runner: one trial run as a real subprocess, with the real lifecycle and DB.

``run_trial`` runs in the test's thread, inside the test's transaction (so queued follow-up runs
are never sent to Celery). Entrypoints are shell commands running small scripts shipped in the
model definition. ``while_supervised`` stands in for a user or the worker's shutdown acting while
the process runs.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import lifecycle
from registry.models import RunState, State, Trial, TrialLog, TrialRun
from tests.helpers import make_tar_gz, process_alive, wait_for
from workers import runner, supervision

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_supervision")]

MASTER = "http://master.invalid:8123"
LONG_AGO = datetime.fromisoformat("2001-01-01T00:00:00+00:00")

# Prints what the trial process sees: its environment, cwd, unpacked files, cluster info.
PROBE = """
import json, os, sys
files = sorted(
    os.path.relpath(os.path.join(root, name))
    for root, _, names in os.walk(".") for name in names
)
with open(os.environ["HEADWAY_CLUSTER_INFO"]) as fh:
    info = json.load(fh)
with open("pkg/data.txt") as fh:
    data = fh.read()
seen = {"env": dict(os.environ), "cwd": os.getcwd(), "files": files, "data": data, "info": info}
print("PROBE " + json.dumps(seen))
"""

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

MODEL_FILES = {"probe.py": PROBE, "stubborn.py": STUBBORN, "pkg/data.txt": "unpacked data\n"}


@pytest.fixture
def work_dir(settings, tmp_path, monkeypatch) -> Path:
    settings.HEADWAY_WORK_DIR = tmp_path / "work"
    settings.HEADWAY_MASTER_URL = MASTER
    settings.HEADWAY_LOG_FLUSH_SECONDS = 0.05
    settings.HEADWAY_HEARTBEAT_SECONDS = 3600.0
    settings.HEADWAY_KILL_GRACE_SECONDS = 0.5
    settings.HEADWAY_THREADS_PER_SLOT = 0
    monkeypatch.delenv("HEADWAY_KEEP_WORKDIRS", raising=False)
    return settings.HEADWAY_WORK_DIR


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("runner-owner")  # no password: no hashing


@pytest.fixture
def submit(owner, work_dir):
    """Create an experiment with a shell ``entrypoint``; return its one trial."""

    def create(entrypoint: str, **config) -> Trial:
        source = {
            "entrypoint": entrypoint,
            "searcher": {"name": "single", "metric": "loss", "max_length": 5},
            "max_restarts": 0,
            **config,
        }
        experiment = lifecycle.experiment_create(
            owner=owner, config_source=source, model_definition=make_tar_gz(MODEL_FILES)
        )
        return Trial.objects.get(experiment=experiment)

    return create


@pytest.fixture
def while_supervised(monkeypatch):
    """Install ``callback(trial_id, run_id, killer)``, called once the runner has started the
    process and registered it for supervision (the run is RUNNING by then)."""

    def install(callback) -> None:
        register = supervision.register

        def register_then_call(trial_id, run_id, killer):
            register(trial_id, run_id, killer)
            callback(trial_id, run_id, killer)

        monkeypatch.setattr(supervision, "register", register_then_call)

    return install


def run_dir(work_dir: Path, trial: Trial, run_id: int = 1) -> Path:
    return work_dir / f"trial-{trial.id}-run-{run_id}"


def log_lines(trial: Trial) -> list[str]:
    return list(
        TrialLog.objects.filter(trial=trial).order_by("id").values_list("message", flat=True)
    )


def probe_output(trial: Trial) -> dict:
    (line,) = [m for m in log_lines(trial) if m.startswith("PROBE ")]
    return json.loads(line.removeprefix("PROBE "))


def test_it_runs_the_entrypoint_and_stores_its_output(submit, work_dir):
    trial = submit("echo to stdout; echo to stderr >&2")
    assert runner.run_trial(trial.id, 1) == 0
    lines = log_lines(trial)
    assert lines[0].startswith(f"[headway] run 1 of trial {trial.id} starting on ")
    assert lines[0].endswith(": echo to stdout; echo to stderr >&2")
    assert lines[1:] == ["to stdout", "to stderr", "[headway] run 1 exited with code 0"]
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert run.state == RunState.EXITED and run.exit_code == 0
    assert run.worker == runner.worker_name()
    trial.refresh_from_db()
    assert trial.state == State.COMPLETED
    assert not run_dir(work_dir, trial).exists()  # a successful run's work dir is removed


def test_it_keeps_the_work_dir_when_asked(submit, work_dir, monkeypatch):
    monkeypatch.setenv("HEADWAY_KEEP_WORKDIRS", "1")
    trial = submit("python probe.py")
    assert runner.run_trial(trial.id, 1) == 0
    assert (run_dir(work_dir, trial) / "code" / "probe.py").is_file()


def test_the_process_gets_headway_variables_and_no_database_access(submit, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/headway")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "config.settings")
    monkeypatch.setenv("SOMETHING_OF_THE_HOST", "passed through")
    trial = submit("python probe.py")
    assert runner.run_trial(trial.id, 1) == 0
    env = probe_output(trial)["env"]
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert env["HEADWAY_MASTER"] == MASTER
    assert env["HEADWAY_TOKEN"] == run.token
    assert env["HEADWAY_TRIAL_ID"] == str(trial.id)
    assert env["HEADWAY_RUN_ID"] == "1"
    assert env["HEADWAY_EXPERIMENT_ID"] == str(trial.experiment_id)
    assert env["PYTHONUNBUFFERED"] == "1"
    # Only an allow-list of the worker's environment reaches trials (tests/workers/test_trial_isolation.py).
    assert "SOMETHING_OF_THE_HOST" not in env
    # The trial talks to the registry over REST only.
    assert "DATABASE_URL" not in env and "DJANGO_SETTINGS_MODULE" not in env
    # `python` in a shell entrypoint is the worker's interpreter (the one with headway).
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_threads_per_slot_sets_the_math_library_threads(submit, settings):
    settings.HEADWAY_THREADS_PER_SLOT = 3
    trial = submit("python probe.py", resources={"slots_per_trial": 1})
    assert runner.run_trial(trial.id, 1) == 0
    env = probe_output(trial)["env"]
    assert env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] == "3"


def test_the_cluster_info_names_the_run_and_the_checkpoint_to_resume(submit):
    trial = submit("python probe.py", hyperparameters={"lr": 0.25})
    checkpoint, _ = lifecycle.checkpoint_register(
        trial_id=trial.id,
        uuid="00000000-0000-0000-0000-0000000000c1",
        steps_completed=40,
        run_id=1,
        resources={"state-dict.pth": 10},
        metadata={},
    )
    assert runner.run_trial(trial.id, 1) == 0
    info = probe_output(trial)["info"]
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert info["master_url"] == MASTER and info["token"] == run.token
    assert (info["experiment_id"], info["trial_id"], info["run_id"]) == (
        trial.experiment_id,
        trial.id,
        1,
    )
    assert info["hparams"] == {"lr": 0.25} and info["trial_seed"] == trial.seed
    assert info["latest_checkpoint"] == str(checkpoint.uuid)
    assert info["latest_checkpoint_steps"] == 40
    assert info["experiment_config"]["entrypoint"] == "python probe.py"


def test_the_model_definition_is_unpacked_into_a_fresh_directory(submit, work_dir, monkeypatch):
    monkeypatch.setenv("HEADWAY_KEEP_WORKDIRS", "1")
    trial = submit("python probe.py")
    code = run_dir(work_dir, trial) / "code"
    code.mkdir(parents=True)
    (code / "left-over-from-an-earlier-attempt.txt").write_text("stale")
    assert runner.run_trial(trial.id, 1) == 0
    seen = probe_output(trial)
    assert Path(seen["cwd"]) == code
    assert seen["files"] == ["pkg/data.txt", "probe.py", "stubborn.py"]
    assert seen["data"] == "unpacked data\n"


@pytest.mark.parametrize(
    ("entrypoint", "max_restarts", "code", "state", "restarts", "next_run"),
    [
        ("exit 0", 0, 0, State.COMPLETED, 0, None),
        ("exit 3", 1, 3, State.ACTIVE, 1, 2),
        ("exit 3", 0, 3, State.ERROR, 0, None),
        ("kill -KILL $$", 0, -signal.SIGKILL, State.ERROR, 0, None),
    ],
    ids=["success", "failure-restarted", "failure-no-restarts-left", "killed-by-a-signal"],
)
def test_the_exit_code_decides_what_happens_to_the_trial(
    submit, work_dir, entrypoint, max_restarts, code, state, restarts, next_run
):
    trial = submit(entrypoint, max_restarts=max_restarts)
    assert runner.run_trial(trial.id, 1) == code
    assert TrialRun.objects.get(trial=trial, run_id=1).exit_code == code
    assert log_lines(trial)[-1] == f"[headway] run 1 exited with code {code}"
    trial.refresh_from_db()
    assert (trial.state, trial.restarts) == (state, restarts)
    queued = TrialRun.objects.filter(trial=trial, state=RunState.QUEUED)
    assert list(queued.values_list("run_id", flat=True)) == ([next_run] if next_run else [])
    # A failed run's work dir stays for inspection.
    assert run_dir(work_dir, trial).exists() == (code != 0)


def test_a_run_is_only_run_once(submit):
    trial = submit("echo once")
    assert runner.run_trial(trial.id, 1) == 0
    assert runner.run_trial(trial.id, 1) is None  # a redelivered task finds it claimed
    assert log_lines(trial).count("once") == 1


def test_a_model_definition_that_cannot_be_unpacked_fails_the_trial(submit):
    trial = submit("echo never")
    trial.experiment.model_definition = b"not a tar.gz"
    trial.experiment.save(update_fields=["model_definition"])
    assert runner.run_trial(trial.id, 1) == 1
    lines = log_lines(trial)
    assert any(m.startswith("[headway] could not launch the trial: ") for m in lines)
    assert "never" not in lines
    trial.refresh_from_db()
    assert trial.state == State.ERROR


def test_a_kill_request_terminates_the_process_group(submit, settings, while_supervised):
    settings.HEADWAY_KILL_GRACE_SECONDS = 600.0  # SIGTERM is enough: no SIGKILL expected
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
    submit, work_dir, while_supervised
):
    trial = submit("python stubborn.py")
    pids_file = run_dir(work_dir, trial) / "code" / "pids"

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
def test_it_heartbeats_while_the_process_runs(submit, settings, while_supervised, interval, beats):
    settings.HEADWAY_HEARTBEAT_SECONDS = interval
    trial = submit("echo one; echo two")
    while_supervised(
        lambda trial_id, run_id, killer: TrialRun.objects.filter(
            trial_id=trial_id, run_id=run_id
        ).update(heartbeat_at=LONG_AGO)
    )
    assert runner.run_trial(trial.id, 1) == 0
    heartbeat = TrialRun.objects.get(trial=trial, run_id=1).heartbeat_at
    assert (heartbeat > LONG_AGO) == beats


def test_a_chatty_process_is_logged_in_few_inserts(submit, settings):
    settings.HEADWAY_LOG_FLUSH_SECONDS = 3600.0  # only the batch size triggers a write
    trial = submit("python -c 'for i in range(1200): print(i)'")
    with CaptureQueriesContext(connection) as queries:
        assert runner.run_trial(trial.id, 1) == 0
    assert log_lines(trial)[1:-1] == [str(i) for i in range(1200)]
    inserts = [q for q in queries if q["sql"].startswith('INSERT INTO "registry_triallog"')]
    assert 1 <= len(inserts) <= 10


# _supervise on its own: lines from a queue instead of a pipe.


def _idle_killer() -> supervision.ProcessGroupKiller:
    """A killer that is never scheduled here; its process has already ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return supervision.ProcessGroupKiller(process, grace=600)


def test_lines_are_written_in_batches_of_500(submit, settings):
    settings.HEADWAY_LOG_FLUSH_SECONDS = 3600.0
    trial = submit("true")
    run = TrialRun.objects.get(trial=trial, run_id=1)
    lines: queue.Queue = queue.Queue()
    for i in range(1200):
        lines.put(f"line {i}")
    lines.put(runner._EOF)
    writer = runner._LogWriter(trial.id, 1)
    runner._supervise(run, _idle_killer(), lines, writer)
    assert log_lines(trial) == [f"line {i}" for i in range(1000)]
    assert [entry.message for entry in writer.pending] == [f"line {i}" for i in range(1000, 1200)]


class _RecordingWriter(runner._LogWriter):
    """The real writer, also noting in memory what each flush wrote (for another thread)."""

    def __init__(self, trial_id: int, run_id: int) -> None:
        super().__init__(trial_id, run_id)
        self.written: list[str] = []

    def flush(self) -> None:
        messages = [entry.message for entry in self.pending]
        super().flush()
        self.written += messages


def test_a_quiet_process_lines_are_written_within_the_flush_interval(submit, settings):
    settings.HEADWAY_LOG_FLUSH_SECONDS = 0.05
    trial = submit("true")
    run = TrialRun.objects.get(trial=trial, run_id=1)
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
            lines.put(runner._EOF)

    producer = threading.Thread(target=end_after_the_flush)
    producer.start()
    runner._supervise(run, _idle_killer(), lines, writer)
    producer.join()
    assert flushed.is_set()
    assert log_lines(trial) == ["line 0", "line 1", "line 2"]


# Determined 0.38 config forms (issue #24): environment_variables, list entrypoints.


def test_config_variables_reach_the_trial_and_headway_s_own_win(submit):
    variables = ["GREETING=hello there", "EQUALS=a=b", "PATH=/opt/custom/bin"]
    trial = submit("python probe.py", environment={"environment_variables": variables})
    assert runner.run_trial(trial.id, 1) == 0
    env = probe_output(trial)["env"]
    assert env["GREETING"] == "hello there" and env["EQUALS"] == "a=b"
    # PATH is the config's, behind the worker's interpreter (which has headway).
    assert env["PATH"].split(":")[1:] == ["/opt/custom/bin"]


def test_variables_by_device_type_pick_cpu_on_a_host_without_gpus(submit):
    by_device = {"cpu": ["DEVICE_KIND=cpu"], "cuda": ["DEVICE_KIND=cuda"]}
    trial = submit("python probe.py", environment={"environment_variables": by_device})
    assert runner.run_trial(trial.id, 1) == 0
    assert probe_output(trial)["env"]["DEVICE_KIND"] == "cpu"


def test_a_list_entrypoint_runs_without_a_shell(submit):
    trial = submit(["python", "-c", "import sys; print('argv', sys.argv[1:])", "$HOME", "a b"])
    assert runner.run_trial(trial.id, 1) == 0
    lines = log_lines(trial)
    assert lines[0].endswith(
        "python -c 'import sys; print('\"'\"'argv'\"'\"', sys.argv[1:])' '$HOME' 'a b'"
    )
    # No shell: "$HOME" is not expanded, "a b" stays one argument.
    assert "argv ['$HOME', 'a b']" in lines
