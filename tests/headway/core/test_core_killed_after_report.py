"""A trial process killed right after a report keeps the report (live registry, real process).

A validation report returns only once delivered, so even SIGKILL right after it loses nothing;
SIGTERM (a host agent's process-group kill) delivers the reports still queued, then ends the
process as SIGTERM does.
"""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from registry.models import Checkpoint, MetricReport, Trial
from tests.helpers import REPO, start_run
from tests.helpers_checkpoints import trial_on_storage
from tests.helpers_trial_process import write_cluster_info

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from headway import core

    ctx = core.init()
    ctx.start()
    if sys.argv[1] == "validation-while-down":
        ctx.train.report_validation_metrics(5, {"validation_loss": 0.25})
        print("training went on", flush=True)
        os._exit(0)
    with ctx.checkpoint.store_path({"steps_completed": 5}) as (path, storage_id):
        (path / "w.bin").write_bytes(b"w")
    if sys.argv[1] == "validation-then-sigkill":
        ctx.train.report_validation_metrics(5, {"validation_loss": 0.25})
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        ctx.train.report_training_metrics(6, {"loss": 0.5})
        os.kill(os.getpid(), signal.SIGTERM)
    raise SystemExit("still alive after the signal")
    """
)


@pytest.fixture
def trial_process(api, live_server, tmp_path: pathlib.Path):
    """Runs SCRIPT as the trial process of a started run; returns (trial, run(mode))."""
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    run = start_run(trial)
    info_path = write_cluster_info(live_server.url, trial, run, tmp_path / "cluster-info.json")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)

    def run_script(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), mode],
            cwd=tmp_path,
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(REPO),
                "HEADWAY_CLUSTER_INFO": str(info_path),
            },
            capture_output=True,
            text=True,
            timeout=120,
        )

    return trial, run_script


def test_validation_report_survives_sigkill_right_after_it(trial_process) -> None:
    trial, run_script = trial_process
    done = run_script("validation-then-sigkill")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert Checkpoint.objects.filter(trial_id=trial.id, steps_completed=5).count() == 1
    stored = MetricReport.objects.get(trial_id=trial.id, group="validation", steps_completed=5)
    assert stored.metrics == {"validation_loss": 0.25}
    assert Trial.objects.get(id=trial.id).best_validation == pytest.approx(0.25)


def test_queued_reports_are_delivered_on_sigterm(trial_process) -> None:
    trial, run_script = trial_process
    done = run_script("training-then-sigterm")
    # Still ended by SIGTERM: the worker and the lifecycle see what they saw before.
    assert done.returncode == -signal.SIGTERM, done.stderr
    stored = MetricReport.objects.get(trial_id=trial.id, group="training", steps_completed=6)
    assert stored.metrics == {"loss": 0.5}


def test_a_validation_report_does_not_stop_training_while_the_registry_is_down(
    trial_process, tmp_path: pathlib.Path
) -> None:
    # The registry's address answers nothing: the report waits a bounded time for delivery,
    # then returns with the report still queued, and the script goes on training.
    from tests.helpers import free_port

    trial, run_script = trial_process
    info_path = tmp_path / "cluster-info.json"
    info = json.loads(info_path.read_text())
    info["master_url"] = f"http://127.0.0.1:{free_port()}"
    info_path.write_text(json.dumps(info))
    done = run_script("validation-while-down")
    assert done.returncode == 0, done.stderr
    assert "training went on" in done.stdout
    assert not MetricReport.objects.filter(trial_id=trial.id).exists()
