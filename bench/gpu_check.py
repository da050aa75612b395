"""GPU check: every CUDA path of Headway in one run of at most 8 minutes, one JSON summary.

Run on a machine with a CUDA device: ``make gpu-check`` (``.venv/bin/python bench/gpu_check.py
--require-gpu``). Each check below runs as a subprocess in its own process group (killed at its
budget) and reports ``{"name", "status": "passed" | "failed" | "skipped", "seconds", "reason" |
"details"}``; ``details`` is the last JSON line the check printed (a probe's findings, the
harness bench's figures) or the tail of its output when it failed. Nothing is downloaded: the
data sets are generated or ship with scikit-learn, and no package is installed.

Budgets (seconds, each check's timeout; they sum to 440 of the 480 allowed, leaving time for
the CUDA probe and start-up). A check past its budget gets SIGTERM (the cluster check then stops
the services it started), its process group SIGKILL ``GRACE_S`` later; a timeout is cut so that
this grace still ends within the 480 s, and a check is not started once less than
``MIN_START_S`` would be left for it. The budgets are about twice what each check took on an
H200 (docs/performance.md, "GPU check"); the harness bench's, which ran past its first budget
there, has more. ``--only NAME`` (repeatable) runs the named checks alone, for a rerun of one
that failed when little of a lent machine's time is left.

==================  ======  ==================================================================
check               budget  what it runs
==================  ======  ==================================================================
cuda_tests             55   pytest ``-m gpu`` on the CUDA tests (harness placement, AMP, exact
                            resume; NCCL with two devices; the TorchTrainer on CUDA)
cluster_trial          85   SQLite server + master worker + host agent that detects its GPU
                            slot (bench/_gpu_cluster.py); a ``slots_per_trial: 1`` trial must
                            complete, its log showing the harness chose ``cuda``
use_amp                15   ``context.experimental.use_amp()``: float16 forward, live scaler
deepspeed              35   examples/digits_deepspeed for 20 batches on DeepSpeed's CUDA
                            accelerator
nvml                   10   the system-metrics sampler's ``gpu0_*`` metrics (NVML)
harness_bench         150   bench/harness_overhead.py ``--device cuda --repeats 4``
lightning              30   a Lightning ``Trainer(accelerator="gpu")`` with HeadwayLogger and
                            HeadwayCallback
transformers           30   a Hugging Face ``Trainer`` on CUDA with ``DetCallback``
dcgan                  30   Determined's DeepSpeed DCGAN port (tests/fixtures/determined_ports)
                            for 20 batches, on generated digits
==================  ======  ==================================================================

The probes (use_amp ... dcgan) are bench/_gpu_probes.py.

Without a CUDA device every check is skipped (``"reason": "no CUDA device"``, with any other
missing requirement, e.g. ``"torchvision not installed"``) and the script exits 0: the CPU dry
run tests/bench/test_gpu_check.py runs. ``--require-gpu`` makes that exit 2 with a message
instead. Exit status 1 when any check failed. The summary is written to ``--out`` (default
``var/gpu-check.json``) and printed as the last line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
TOTAL_BUDGET_S = 480.0
MIN_START_S = 10.0  # a check with less than this left of the total is skipped, not started
GRACE_S = 20.0  # after a check's timeout: from its SIGTERM to the SIGKILL of its process group
CUDA_PROBE_TIMEOUT_S = 60.0
TAIL_CHARS = 3000
NO_CUDA = "no CUDA device"
NO_GPU_EXIT = 2


@dataclass(frozen=True)
class Check:
    """One check: a command run from the repository root with a timeout.

    Attributes:
        name: its key in the summary.
        budget_s: its timeout in seconds (see the module docstring's table).
        argv: the command; ``{python}`` and ``{workdir}`` (a fresh temporary folder) are filled in
            (``str.format``: a literal brace is written twice).
        modules: Python modules it needs; a missing one skips it (``"<module> not installed"``).
    """

    name: str
    budget_s: float
    argv: tuple[str, ...]
    modules: tuple[str, ...] = ()


def _probe(name: str, *modules: str, budget_s: float) -> Check:
    """A check that runs ``bench/_gpu_probes.py NAME --device cuda``."""
    argv = ("{python}", str(BENCH / "_gpu_probes.py"), name, "--device", "cuda")
    return Check(name, budget_s, (*argv, "--workdir", "{workdir}"), modules=("torch", *modules))


CUDA_TESTS = (
    "tests/headway/pytorch/test_cuda.py",
    "tests/headway/pytorch/test_distributed_cuda.py",
    "tests/headway/torch_trainer/test_torch_trainer.py",
)

# -p no:django: these SDK tests need no database (nor Django, absent on a bare GPU host). Not
# `-n 0`: pytest runs in one process without it, and a bare host may lack pytest-xdist.
PYTEST = ("{python}", "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:django", "-q")

CHECKS: list[Check] = [
    Check(
        "cuda_tests",
        55,
        (*PYTEST, "-m", "gpu", *CUDA_TESTS),
        modules=("torch", "pytest"),
    ),
    Check(
        "cluster_trial",
        85,
        ("{python}", str(BENCH / "_gpu_cluster.py"), "--device", "cuda", "--workdir", "{workdir}"),
        modules=("torch", "django", "gunicorn", "celery"),
    ),
    _probe("use_amp", budget_s=15),
    _probe("deepspeed", "deepspeed", budget_s=35),
    _probe("nvml", "pynvml", budget_s=10),
    Check(
        "harness_bench",
        150,
        ("{python}", str(BENCH / "harness_overhead.py"), "--device", "cuda", "--repeats", "4"),
        modules=("torch",),
    ),
    _probe("lightning", "lightning", budget_s=30),
    _probe("transformers", "transformers", budget_s=30),
    _probe("dcgan", "deepspeed", "torchvision", budget_s=30),
]


def cuda_devices(python: str) -> tuple[int, str | None]:
    """The CUDA devices torch sees, asked in a subprocess (this process never initialises CUDA).

    Returns:
        ``(count, None)``, or ``(0, why)`` when torch cannot be imported or the probe failed.
    """
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        done = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=CUDA_PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 0, f"the CUDA probe took more than {CUDA_PROBE_TIMEOUT_S:.0f} s"
    if done.returncode != 0:
        return 0, f"the CUDA probe failed: {done.stderr.strip()[-300:]}"
    return int(done.stdout.split()[-1]), None


def missing_modules(check: Check) -> list[str]:
    """``"<module> not installed"`` for each module of ``check`` this interpreter cannot find."""
    return [f"{m} not installed" for m in check.modules if importlib.util.find_spec(m) is None]


def last_json(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that parses as a JSON object, or None."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def run_check(check: Check, timeout_s: float, python: str) -> dict[str, Any]:
    """Run ``check`` with ``timeout_s``; its summary entry (passed or failed)."""
    began = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix=f"gpu-check-{check.name}-") as workdir,
        tempfile.TemporaryFile("w+") as output,
    ):
        argv = [a.format(python=python, workdir=workdir) for a in check.argv]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: what it leaves is killed below
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            # SIGTERM first: the cluster check then stops the services it started in sessions
            # of their own, which the group's SIGKILL below would not reach.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=GRACE_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        output.seek(0)
        text = output.read()
    entry: dict[str, Any] = {"name": check.name, "seconds": round(time.monotonic() - began, 1)}
    details = last_json(text)
    if timed_out or proc.returncode != 0:
        why = (
            f"timed out after {timeout_s:.0f} s" if timed_out else f"exit status {proc.returncode}"
        )
        entry.update(status="failed", reason=why, output_tail=text[-TAIL_CHARS:])
    else:
        # Without a JSON line (pytest): its last line, the counts ("6 passed in 40.1s").
        last = text.strip().splitlines()[-1:] or [""]
        entry.update(status="passed", details=details or {"last_line": last[0]})
    return entry


def run_checks(
    checks: list[Check], devices: int, no_cuda_reason: str | None, python: str
) -> list[dict[str, Any]]:
    """Each check's summary entry, in order, within ``TOTAL_BUDGET_S`` from now."""
    deadline = time.monotonic() + TOTAL_BUDGET_S
    results = []
    for check in checks:
        reasons = ([no_cuda_reason or NO_CUDA] if devices == 0 else []) + missing_modules(check)
        left = deadline - time.monotonic()
        if not reasons and left - GRACE_S < MIN_START_S:
            reasons = [f"the {TOTAL_BUDGET_S:.0f} s budget is spent"]
        if reasons:
            results.append({"name": check.name, "status": "skipped", "reason": "; ".join(reasons)})
            continue
        print(f"gpu-check: {check.name} (budget {check.budget_s:.0f} s) ...", file=sys.stderr)
        results.append(run_check(check, min(check.budget_s, left - GRACE_S), python))
        print(f"gpu-check: {check.name} {results[-1]['status']}", file=sys.stderr)
    return results


def summary(
    results: list[dict[str, Any]], devices: int, started: datetime, seconds: float
) -> dict[str, Any]:
    """The JSON summary: when (``started``, UTC) and where it ran, for how many seconds, the
    counts and every check's entry."""
    counts = {s: sum(r["status"] == s for r in results) for s in ("passed", "failed", "skipped")}
    return {
        "started": started.isoformat(timespec="seconds"),
        "host": platform.node(),
        "cuda_devices": devices,
        "seconds": round(seconds, 1),
        **counts,
        "checks": results,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the checks, write and print the summary; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "var" / "gpu-check.json")
    parser.add_argument(
        "--only",
        action="append",
        choices=[check.name for check in CHECKS],
        metavar="NAME",
        help="run only this check (repeatable; default: all, in order)",
    )
    parser.add_argument(
        "--require-gpu",
        action="store_true",
        help=f"exit {NO_GPU_EXIT} when no CUDA device is visible (make gpu-check)",
    )
    args = parser.parse_args(argv)
    began, started = time.monotonic(), datetime.now(UTC)
    python = sys.executable
    devices, why = cuda_devices(python)
    if devices == 0 and args.require_gpu:
        print(
            f"gpu-check: {why or NO_CUDA} visible to torch; run it on a machine with a GPU "
            "(without --require-gpu every check is reported as skipped)",
            file=sys.stderr,
        )
        return NO_GPU_EXIT
    checks = [c for c in CHECKS if args.only is None or c.name in args.only]
    results = run_checks(checks, devices, why, python)
    report = summary(results, devices, started, time.monotonic() - began)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
