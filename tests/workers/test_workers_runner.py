"""The host agent's runner: one trial run as a real subprocess, with the real lifecycle and DB.

``run_trial`` runs in the test's thread as the ``host_agent`` fixture's host: it claims the run
placed there, fetches its spec, token and model definition, sends its output and exit to the
live server over REST; the tests read what the master stored. Entrypoints are shell commands
running small scripts shipped in the model definition. Kills, shutdowns, heartbeats and log
batching: test_workers_run_loop.py.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from registry import lifecycle, scheduling
from registry.models import RunState, State, Trial, TrialRun
from tests.helpers import make_tar_gz
from tests.helpers_agent import configure_agent, log_lines, trial_on_agent
from workers import runner

pytestmark = pytest.mark.usefixtures("fresh_supervision")

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

MODEL_FILES: dict[str, bytes | str] = {"probe.py": PROBE, "pkg/data.txt": "unpacked data\n"}


@pytest.fixture
def agent(host_agent):
    """This process as the live server's host agent, with the tests' timing."""
    configure_agent()
    return host_agent


@pytest.fixture
def work_dir(agent) -> Path:
    return agent.work_dir


@pytest.fixture
def submit(agent, django_user_model):
    """Create an experiment with a shell ``entrypoint``, its run placed on the agent's host;
    return its one trial."""
    owner = django_user_model.objects.create_user("runner-owner")  # no password: no hashing

    def create(entrypoint: str | list[str], **config) -> Trial:
        source = {
            "entrypoint": entrypoint,
            "searcher": {"name": "single", "metric": "loss", "max_length": 5},
            "max_restarts": 0,
            **config,
        }
        return trial_on_agent(agent, owner, source, make_tar_gz(MODEL_FILES))

    return create


def run_dir(work_dir: Path, trial: Trial, run_id: int = 1) -> Path:
    return work_dir / f"trial-{trial.id}-run-{run_id}"


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
    assert run.worker.startswith(f"{runner.worker_name()}/")  # one claim attempt of this worker
    trial.refresh_from_db()
    assert trial.state == State.COMPLETED
    assert not run_dir(work_dir, trial).exists()  # a successful run's work dir is removed


def test_it_keeps_the_work_dir_when_asked(submit, work_dir, monkeypatch):
    monkeypatch.setenv("HEADWAY_KEEP_WORKDIRS", "1")
    trial = submit("python probe.py")
    assert runner.run_trial(trial.id, 1) == 0
    assert (run_dir(work_dir, trial) / "code" / "probe.py").is_file()


def test_the_process_gets_headway_variables_and_no_database_access(submit, agent, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/headway")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "config.settings")
    monkeypatch.setenv("SOMETHING_OF_THE_HOST", "passed through")
    monkeypatch.setenv("HEADWAY_HOST_TOKEN", agent.token)
    trial = submit("python probe.py")
    assert runner.run_trial(trial.id, 1) == 0
    env = probe_output(trial)["env"]
    run = TrialRun.objects.get(trial=trial, run_id=1)
    assert env["HEADWAY_MASTER"] == agent.url
    assert env["HEADWAY_TOKEN"] == run.token
    assert env["HEADWAY_TRIAL_ID"] == str(trial.id)
    assert env["HEADWAY_RUN_ID"] == "1"
    assert env["HEADWAY_EXPERIMENT_ID"] == str(trial.experiment_id)
    assert env["PYTHONUNBUFFERED"] == "1"
    # Only an allow-list of the worker's environment reaches trials (tests/workers/test_trial_isolation.py).
    assert "SOMETHING_OF_THE_HOST" not in env
    # The trial talks to the registry over REST only, with its run's token, not its host's.
    assert "DATABASE_URL" not in env and "DJANGO_SETTINGS_MODULE" not in env
    assert agent.token not in env.values()
    # `python` in a shell entrypoint is the worker's interpreter (the one with headway).
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_threads_per_slot_sets_the_math_library_threads(submit):
    configure_agent(HEADWAY_THREADS_PER_SLOT=3)
    trial = submit("python probe.py", resources={"slots_per_trial": 1})
    assert runner.run_trial(trial.id, 1) == 0
    env = probe_output(trial)["env"]
    assert env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] == "3"


def test_the_cluster_info_names_the_run_and_the_checkpoint_to_resume(submit, agent):
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
    assert info["master_url"] == agent.url and info["token"] == run.token
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
    assert seen["files"] == ["pkg/data.txt", "probe.py"]
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


def test_a_model_definition_the_host_cannot_unpack_is_lost_before_start_then_error(submit, agent):
    # Not the code's failure (its ranks never started): re-queued after a back-off, not
    # counted in max_restarts, and ERROR at max_lost_before_start with the cause said.
    trial = submit("echo never", max_restarts=5)
    trial.experiment.model_definition = b"not a tar.gz"
    trial.experiment.save(update_fields=["model_definition"])
    for run_id in (1, 2, 3):
        if run_id > 1:
            # The back-off holds the run back from placement; here it is over at once.
            queued = TrialRun.objects.filter(trial=trial, run_id=run_id)
            assert queued.get().host is None and queued.get().not_before is not None
            queued.update(not_before=None)
            assert scheduling.place_queued_runs() == [(trial.id, run_id)]
        assert runner.run_trial(trial.id, run_id) is None
    lines = log_lines(trial)
    assert sum(m.startswith("[headway] could not launch the trial: ") for m in lines) == 3
    assert "never" not in lines
    trial.refresh_from_db()
    assert (trial.state, trial.restarts, trial.run_id) == (State.ERROR, 0, 3)
    cause = f"host {agent.name} could not start run 3: ModelDefinitionError: "
    assert trial.scheduling_message.startswith(
        "failed: lost before its ranks started 3 times in a row (max_lost_before_start 3); "
        f"last: {cause}"
    )
    assert lines[-1].startswith("[headway] run 3: failed: lost before its ranks started")


# Determined 0.38 config forms: environment_variables, list entrypoints.


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
