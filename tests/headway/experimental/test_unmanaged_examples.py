"""examples/unmanaged/ run as plain ``python`` (and ``torchrun`` for the distributed one) against
a live registry: the scripts written for Determined 0.38's ``core_v2`` report their metrics and
checkpoints, end COMPLETED, and the checkpoint example resumes its trial when run again."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import pytest

from registry.models import Checkpoint, Experiment, MetricReport, State, Trial

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "unmanaged"
TIMEOUT_S = 300


@pytest.fixture
def env(api, live_server, tmp_path: pathlib.Path) -> dict[str, str]:
    """A script's environment: the live registry and alice's token; no managed trial."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    env |= {
        "HEADWAY_MASTER": live_server.url,
        "HEADWAY_TOKEN": api.token,
        "HEADWAY_HOME": str(tmp_path / "home"),
        "HEADWAY_SYSTEM_METRICS": "0",
    }
    return env


def _run(args: list[str], env: dict[str, str], cwd: pathlib.Path) -> str:
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _steps(trial: Trial, group: str) -> list[int]:
    rows = MetricReport.objects.filter(trial=trial, group=group).order_by("steps_completed")
    return list(rows.values_list("steps_completed", flat=True))


def test_the_singleton_example(env, tmp_path: pathlib.Path) -> None:
    _run([sys.executable, str(EXAMPLES / "1_singleton.py")], env, tmp_path)
    experiment = Experiment.objects.get(name="unmanaged-1-singleton")
    assert experiment.unmanaged and experiment.state == State.COMPLETED
    trial = experiment.trials.get()
    assert _steps(trial, "training") == list(range(100))
    assert _steps(trial, "validation") == list(range(9, 100, 10))


def test_the_checkpoints_example_resumes_its_trial(env, tmp_path: pathlib.Path) -> None:
    script = [sys.executable, str(EXAMPLES / "2_checkpoints.py")]
    first = _run(script, env, tmp_path)
    assert "initial step: 0" in first
    second = _run(script, env, tmp_path)
    assert "initial step: 99" in second and "Checkpoint contents: 99," in second
    experiment = Experiment.objects.get(external_id="test-unmanaged-2-checkpoints")
    trial = experiment.trials.get()
    assert trial.state == State.COMPLETED and trial.run_id == 2
    assert _steps(trial, "training") == list(range(199))
    assert Checkpoint.objects.filter(trial=trial).count() == 20


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_torch_distributed_example_on_two_cpu_processes(env, tmp_path: pathlib.Path) -> None:
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        "--max_restarts=0",
        str(EXAMPLES / "3_torch_distributed.py"),
    ]
    out = _run(args, env, tmp_path)
    experiment = Experiment.objects.get(name="unmanaged-3-torch-distributed")
    assert f"/experiments/{experiment.id}/" in out
    trial = experiment.trials.get()
    assert trial.state == State.COMPLETED
    # Every step's checkpoint holds both ranks' shards.
    checkpoints = Checkpoint.objects.filter(trial=trial)
    assert checkpoints.count() == 100
    assert set(checkpoints.latest("steps_completed").resources) >= {"state_0", "state_1"}


SCRIPT_THAT_RAISES = """
from headway.experimental import core_v2
core_v2.init(config=core_v2.Config(name="raises-uncaught"))
core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
raise SystemError("the script failed")
"""


def test_a_script_that_raises_ends_its_trial_error(env, tmp_path: pathlib.Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT_THAT_RAISES],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1 and "the script failed" in done.stderr
    trial = Experiment.objects.get(name="raises-uncaught").trials.get()
    assert trial.state == State.ERROR
    assert _steps(trial, "training") == [1]
