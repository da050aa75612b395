"""bench/gpu_check.py (``make gpu-check``) off a GPU host: the dry run that skips every check
with its reasons, ``--require-gpu``'s refusal, how one check's result is recorded, and each of
its probes on the CPU (``--device cpu``), so that the code a GPU host runs is exercised here.

On a machine with a CUDA device the dry-run tests skip: there the script runs every check for
real (minutes), which is ``make gpu-check``'s job, not the suite's.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "bench"))
import gpu_check

SCRIPT = str(REPO / "bench" / "gpu_check.py")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


no_gpu_here = pytest.mark.skipif(_cuda(), reason="a CUDA device is present: the checks would run")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, SCRIPT, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@no_gpu_here
def test_without_a_gpu_every_check_is_skipped_with_its_reasons(tmp_path) -> None:
    out = tmp_path / "summary.json"
    done = _run("--out", str(out))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed == json.loads(out.read_text())  # the file and the last line agree
    assert printed["cuda_devices"] == 0
    assert (printed["passed"], printed["failed"]) == (0, 0)
    names = [check.name for check in gpu_check.CHECKS]
    assert names == [
        "cuda_tests",
        "cluster_trial",
        "use_amp",
        "deepspeed",
        "nvml",
        "harness_bench",
        "lightning",
        "transformers",
        "dcgan",
    ]
    assert [c["name"] for c in printed["checks"]] == names
    assert printed["skipped"] == len(names)
    for check in printed["checks"]:
        assert set(check) == {"name", "status", "reason"}, check
        assert check["status"] == "skipped"
        assert check["reason"].startswith("no CUDA device"), check
    dcgan = printed["checks"][-1]["reason"]
    if importlib.util.find_spec("torchvision") is None:
        assert dcgan == "no CUDA device; torchvision not installed"


@no_gpu_here
def test_require_gpu_exits_2_with_a_message_and_writes_nothing(tmp_path) -> None:
    out = tmp_path / "summary.json"
    done = _run("--require-gpu", "--out", str(out))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "gpu-check: no CUDA device visible to torch" in done.stderr
    assert "run it on a machine with a GPU" in done.stderr
    assert not out.exists()


@no_gpu_here
def test_only_runs_the_named_checks_in_the_scripts_order(tmp_path) -> None:
    out = tmp_path / "summary.json"
    done = _run("--only", "nvml", "--only", "cuda_tests", "--out", str(out))
    assert done.returncode == 0, done.stderr
    printed = json.loads(out.read_text())
    assert [c["name"] for c in printed["checks"]] == ["cuda_tests", "nvml"]
    assert printed["skipped"] == 2


def test_only_refuses_an_unknown_check_naming_it_and_the_choices(tmp_path) -> None:
    done = _run("--only", "cuda_test", "--out", str(tmp_path / "summary.json"))
    assert done.returncode == 2
    assert "argument --only: invalid choice: 'cuda_test'" in done.stderr
    assert "'harness_bench'" in done.stderr
    assert not (tmp_path / "summary.json").exists()


def _check(tmp_path, body: str, budget_s: float = 60) -> gpu_check.Check:
    script = tmp_path / "check.py"
    script.write_text(body)
    return gpu_check.Check("probe", budget_s, ("{python}", str(script), "{workdir}"))


def test_a_check_passes_with_its_last_json_line_as_details(tmp_path) -> None:
    check = _check(
        tmp_path,
        "import json, os, sys\n"
        "assert os.path.isdir(sys.argv[1])  # {workdir}: a fresh folder\n"
        "print('warming up')\n"
        "print(json.dumps({'device': 'cuda', 'batches': 20}))\n",
    )
    entry = gpu_check.run_check(check, 60, sys.executable)
    assert entry["status"] == "passed", entry
    assert entry["details"] == {"device": "cuda", "batches": 20}
    assert entry["seconds"] >= 0


def test_a_check_without_json_passes_with_its_last_line(tmp_path) -> None:
    entry = gpu_check.run_check(
        _check(tmp_path, "print('x')\nprint('6 passed in 4.2s')\n"), 60, sys.executable
    )
    assert entry["status"] == "passed"
    assert entry["details"] == {"last_line": "6 passed in 4.2s"}


def test_a_failing_check_records_its_exit_status_and_output(tmp_path) -> None:
    check = _check(tmp_path, "import sys\nprint('the probe found float32')\nsys.exit(3)\n")
    entry = gpu_check.run_check(check, 60, sys.executable)
    assert entry["status"] == "failed"
    assert entry["reason"] == "exit status 3"
    assert "the probe found float32" in entry["output_tail"]


def test_a_check_past_its_timeout_is_stopped_and_failed(tmp_path) -> None:
    check = _check(tmp_path, "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    entry = gpu_check.run_check(check, 1, sys.executable)
    assert entry["status"] == "failed"
    assert entry["reason"] == "timed out after 1 s"
    assert "started" in entry["output_tail"]


# -- the probes, on the CPU ---------------------------------------------------------------------

PROBE_MODULES = {
    "use_amp": None,
    "nvml": "pynvml",
    "deepspeed": "deepspeed",
    "lightning": "lightning",
    "transformers": "transformers",
}


def _probe(argv: list[str], tmp_path) -> dict:
    done = subprocess.run(
        [sys.executable, *argv, "--device", "cpu", "--workdir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@no_gpu_here  # on a GPU host the harness and the agent pick the GPU themselves
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PROBE_MODULES))
def test_each_probe_runs_on_the_cpu(name: str, tmp_path) -> None:
    if PROBE_MODULES[name]:
        pytest.importorskip(PROBE_MODULES[name])
    found = _probe([str(REPO / "bench" / "_gpu_probes.py"), name], tmp_path)
    assert found["probe"] == name and found["device"] == "cpu"
    if name == "use_amp":
        assert found["autocast_dtype"] == "torch.bfloat16" and found["scaler"] == {}
    if name == "nvml":
        assert found["gpu_metrics"] == {}


@no_gpu_here
@pytest.mark.slow
def test_the_cluster_probe_completes_a_trial_on_a_detected_cpu_slot(tmp_path) -> None:
    pytest.importorskip("gunicorn")
    found = _probe([str(REPO / "bench" / "_gpu_cluster.py")], tmp_path)
    assert found["experiment_state"] == "COMPLETED" and found["steps_completed"] == 20
    # No HEADWAY_SLOTS: the agent sized the host itself (one CPU slot without a GPU).
    assert found["host"] == {"slots": 1, "devices": ["cpu0"], "gpu": False}
    assert found["trial_log"] == ["gpu-check device cpu CUDA_VISIBLE_DEVICES=None"]
