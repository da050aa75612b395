"""The cluster check of bench/gpu_check.py: one ``slots_per_trial: 1`` trial on a real cluster.

``python bench/_gpu_cluster.py --device cuda --workdir DIR`` starts what ``manage.py serve``
starts, on a fresh SQLite database and the filesystem broker (nothing to install or reach): the
web server (gunicorn, config/gunicorn.py), the master's Celery worker and one host agent
(``manage.py worker``). Unlike ``serve`` it does not set ``HEADWAY_SLOTS``, so the agent sizes
its host as a GPU host would: one slot per visible CUDA device (``workers.hosts.detect_host``).
It then submits a small PyTorchTrial that prints the device the harness chose, waits for the
experiment to end and asserts: the host registered with ``gpu`` true (``--device cuda``) and at
least one device, the experiment COMPLETED, and the trial's log shows ``device cuda``.
``--device cpu`` runs the same on a machine without a GPU (a CPU slot, ``device cpu``). Prints
one JSON line of what it found; a failed assertion exits non-zero. Everything it started is
stopped, and its database removed, on exit, SIGTERM included.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
from _server import REPO, Backend, Server, single_file_model_definition, stop_process_group

TRIAL_TIMEOUT_S = 60.0
AGENT_TIMEOUT_S = 40.0
BATCHES = 20
MARK = "gpu-check device"

MODEL_DEF = f'''
import os

import torch
from torch import nn

from headway import pytorch


class DeviceTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        print(f"{MARK} {{context.device.type}} CUDA_VISIBLE_DEVICES={{visible}}", flush=True)

    def _data(self):
        x = torch.randn(320, 8, generator=torch.Generator().manual_seed(0))
        return torch.utils.data.TensorDataset(x, (x.sum(1) > 0).long())

    def build_training_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=64)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {{"loss": loss}}

    def evaluate_batch(self, batch):
        x, y = batch
        return {{"validation_loss": nn.functional.cross_entropy(self.model(x), y)}}
'''

CONFIG = {
    "name": "gpu-check",
    "entrypoint": "model_def:DeviceTrial",
    "hyperparameters": {"global_batch_size": 16},
    "searcher": {
        "name": "single",
        "metric": "validation_loss",
        "max_length": {"batches": BATCHES},
    },
    "resources": {"slots_per_trial": 1},
    "max_restarts": 0,
}


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # runs the clean-up in main's finally


def _wait(what: str, timeout: float, poll: Any) -> Any:
    """``poll()``'s first truthy value, tried every 0.5 s for ``timeout`` seconds.

    Raises:
        AssertionError: naming ``what`` when the time is up.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = poll()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def run(
    device: str, workdir: Path, backend: Backend, processes: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
    """Start the cluster on ``backend`` (each process appended to ``processes``), run the
    trial, assert what it found."""
    for name in ("REDIS_URL", "HEADWAY_SLOTS", "HEADWAY_MASTER", "HEADWAY_HOST_TOKEN"):
        backend.env.pop(name, None)
    backend.env.update(HEADWAY_HOST_NAME="gpu-check", LOG_LEVEL="INFO")
    token = backend.prepare("gpu-check")
    server = Server(backend, kind="serve")
    backend.env["HEADWAY_MASTER_URL"] = server.url
    server.start()
    assert server.proc is not None
    processes.append(server.proc)
    logs = {}
    for name, argv in {
        "master": [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q",
                   backend.env["HEADWAY_QUEUE"], "--pool=threads", "--concurrency=2",
                   "--without-gossip", "--without-mingle", "-l", "info", "-B"],
        "agent": [sys.executable, str(REPO / "manage.py"), "worker"],
    }.items():  # fmt: skip
        logs[name] = workdir / f"{name}.log"
        with logs[name].open("w") as log:
            processes.append(
                subprocess.Popen(
                    argv,
                    cwd=REPO,
                    env=backend.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    api = f"{server.url}/api/v1"

    def get(path: str, **params: Any) -> Any:
        response = http.get(f"{api}/{path}", params=params, timeout=30)
        response.raise_for_status()
        return response.json()

    def host() -> dict[str, Any] | None:
        rows = get("workers/")
        rows = rows["results"] if isinstance(rows, dict) else rows
        return next((h for h in rows if h["name"] == "gpu-check" and h["alive"]), None)

    try:
        found = _wait("the host agent's first heartbeat", AGENT_TIMEOUT_S, host)
    except AssertionError:
        raise AssertionError(f"no host; agent log:\n{logs['agent'].read_text()[-2000:]}") from None
    assert found["gpu"] == (device == "cuda") and found["devices"], found
    model = single_file_model_definition("model_def.py", MODEL_DEF)
    response = http.post(
        f"{api}/experiments/", json={"config": CONFIG, "model_definition": model}, timeout=30
    )
    assert response.status_code in (200, 201), response.text
    experiment_id = response.json()["id"]

    def ended() -> dict[str, Any] | None:
        experiment = get(f"experiments/{experiment_id}/")
        return experiment if experiment["state"] in ("COMPLETED", "ERROR", "CANCELED") else None

    experiment = _wait(f"experiment {experiment_id} to end", TRIAL_TIMEOUT_S, ended)
    (trial,) = get(f"experiments/{experiment_id}/trials/")["results"]
    lines = [row["message"] for row in get(f"trials/{trial['id']}/logs/", limit=10000)["results"]]
    assert experiment["state"] == "COMPLETED", (experiment["state"], lines[-40:])
    assert trial["steps_completed"] == BATCHES, trial
    marks = [line.strip() for line in lines if MARK in line]
    assert marks and all(f"{MARK} {device} " in m for m in marks), (marks, lines[-40:])
    return {
        "device": device,
        "host": {k: found[k] for k in ("slots", "devices", "gpu")},
        "experiment_state": experiment["state"],
        "steps_completed": trial["steps_completed"],
        "trial_log": marks,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--workdir", type=Path, required=True, help="an empty folder to write in")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    backend = Backend.sqlite()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        found = run(args.device, args.workdir.resolve(), backend, processes)
    finally:
        for process in reversed(processes):  # the agent, the master, then the web server
            stop_process_group(process, grace=5.0)
        backend.cleanup()
    print(json.dumps({"probe": "cluster_trial", **found}))


if __name__ == "__main__":
    main()
