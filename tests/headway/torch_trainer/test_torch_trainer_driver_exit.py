"""A driver that ends without ``TorchTrainer.shutdown()`` (it raised, or it forgot) still exits,
and takes its worker processes with it: on the cluster the trial then ends (ERROR when the
driver raised) instead of holding its slots until killed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow  # each case starts a driver and two workers

# A file of its own (not -c): the forkserver re-imports the driver's main module, so it needs
# the __main__ guard, as every TorchTrainer program does.
DRIVER = f"""
import json, sys
sys.path.insert(0, {str(REPO)!r})
from headway.torch_trainer import BATCH_SIZE, TorchTrainer
from tests.torch_trainer_operators import LinearOperator

if __name__ == "__main__":
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator, num_workers=2, config={{BATCH_SIZE: 4}},
        scheduler_step_freq="manual",
    )
    trainer.train(num_steps=1)
    print("PIDS" + json.dumps(trainer.worker_pids), flush=True)
    if sys.argv[1] == "raise":
        raise ValueError("the driver fails on purpose")
    # "forget": returns without trainer.shutdown()
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _pids(stdout: str) -> list[int]:
    line = next((x for x in stdout.splitlines() if x.startswith("PIDS")), "PIDS[]")
    return list(json.loads(line[len("PIDS") :]))


@pytest.mark.parametrize(("ending", "exit_code"), [("raise", 1), ("forget", 0)])
def test_a_driver_that_never_calls_shutdown_exits_and_ends_its_workers(
    tmp_path: Path, ending: str, exit_code: int
) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k not in ("HEADWAY_CLUSTER_INFO",)}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.Popen(
        [sys.executable, str(script), ending],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A hang guard only: the driver is expected to be done long before.
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        for pid in _pids(stdout):  # leave nothing behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the driver did not exit ({ending}); its stderr:\n{stderr[-3000:]}")
    pids = _pids(stdout)
    assert len(pids) == 2, stderr[-3000:]
    assert proc.returncode == exit_code, stderr[-3000:]
    if ending == "raise":
        assert "ValueError: the driver fails on purpose" in stderr
    assert all(_gone(pid) for pid in pids), [psutil.Process(p).cmdline() for p in pids]
