"""The whole system: CLI submits the digits example, a real Celery worker (Redis broker,
PostgreSQL) trains it through the harness, and the checkpoint downloaded over REST reproduces
the reported validation accuracy."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from itertools import pairwise

import pytest
import requests
import torch

from tests.helpers import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "digits"


def headway_cli(cluster, token, *args, timeout=600):
    env = dict(cluster.env, HEADWAY_TOKEN=token)
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "headway.cli.main", "--master", cluster.url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def load_example_module():
    spec = importlib.util.spec_from_file_location("digits_model_def", EXAMPLE / "model_def.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_digits_example_trains_end_to_end(cluster, cluster_token):
    created = headway_cli(
        cluster,
        cluster_token,
        "experiment",
        "create",
        str(EXAMPLE / "const.yaml"),
        str(EXAMPLE),
        "--follow",
    )
    worker_log = cluster.worker_log.read_text(errors="replace")[-3000:]
    assert created.returncode == 0, f"{created.stdout}\n{created.stderr}\nworker:\n{worker_log}"
    assert "COMPLETED" in created.stdout + created.stderr

    session = requests.Session()
    session.headers["Authorization"] = f"Token {cluster_token}"
    api = f"{cluster.url}/api/v1"
    experiment = session.get(f"{api}/experiments/", timeout=30).json()["results"][0]
    assert experiment["state"] == "COMPLETED"
    (trial,) = session.get(f"{api}/experiments/{experiment['id']}/trials/", timeout=30).json()[
        "results"
    ]
    assert trial["state"] == "COMPLETED" and trial["run_id"] == 1 and trial["restarts"] == 0

    # Metrics: both groups stored with strictly increasing steps_completed.
    series = session.get(f"{api}/trials/{trial['id']}/metrics/?max_points=0", timeout=30).json()[
        "series"
    ]
    by_key = {(s["group"], s["name"]): s for s in series}
    for key in [
        ("training", "loss"),
        ("validation", "validation_accuracy"),
        ("validation", "validation_loss"),
    ]:
        steps = by_key[key]["steps"]
        assert len(steps) >= 2, key
        assert all(a < b for a, b in pairwise(steps)), key
    accuracy = by_key[("validation", "validation_accuracy")]
    assert accuracy["values"][-1] >= 0.90
    assert trial["best_validation"] == max(accuracy["values"])

    # The latest checkpoint, downloaded over REST, reproduces the accuracy reported at its step.
    checkpoint_uuid = trial["latest_checkpoint"]
    checkpoint = session.get(f"{api}/checkpoints/{checkpoint_uuid}/", timeout=30).json()
    assert checkpoint["steps_completed"] == trial["steps_completed"]
    download = session.get(f"{api}/checkpoints/{checkpoint_uuid}/download", timeout=60)
    assert download.status_code == 200
    assert download.headers["Content-Type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(download.content)) as tar:
        names = set(tar.getnames())
        assert names == set(checkpoint["resources"])
        state = torch.load(io.BytesIO(tar.extractfile("state-dict.pth").read()), weights_only=False)
    assert set(state) >= {
        "models_state_dict",
        "optimizers_state_dict",
        "lr_schedulers_state_dict",
        "callbacks",
    }

    example = load_example_module()
    hparams = trial["hparams"]
    model = example.build_model(int(hparams["channels"]), float(hparams["dropout"]))
    model.load_state_dict(state["models_state_dict"][0])
    model.eval()
    _, validation = example.digits_datasets()
    images, labels = validation.tensors
    with torch.no_grad():
        reproduced = (model(images).argmax(dim=1) == labels).float().mean().item()
    reported = accuracy["values"][accuracy["steps"].index(checkpoint["steps_completed"])]
    assert reproduced == pytest.approx(reported, abs=1e-6)

    # One file of the checkpoint.
    single = session.get(
        f"{api}/checkpoints/{checkpoint_uuid}/download",
        params={"path": "metadata.json"},
        timeout=30,
    )
    assert single.status_code == 200
    assert json.loads(single.content)["steps_completed"] == checkpoint["steps_completed"]

    # CLI reads back what the cluster recorded.
    described = headway_cli(
        cluster, cluster_token, "experiment", "describe", str(experiment["id"]), "--json"
    )
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["experiment"]["state"] == "COMPLETED"
    logs = headway_cli(cluster, cluster_token, "trial", "logs", str(trial["id"]))
    assert logs.returncode == 0 and "exited with code 0" in logs.stdout
    listed = headway_cli(cluster, cluster_token, "checkpoint", "list", str(experiment["id"]))
    assert listed.returncode == 0 and checkpoint_uuid in listed.stdout


def test_a_failing_entrypoint_ends_in_error_after_its_restarts(cluster, cluster_token, tmp_path):
    (tmp_path / "train.py").write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    config = tmp_path / "fail.yaml"
    config.write_text(
        "name: failing\nentrypoint: python train.py\nmax_restarts: 1\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n"
    )
    created = headway_cli(
        cluster, cluster_token, "experiment", "create", str(config), str(tmp_path), "--follow"
    )
    assert created.returncode == 1, created.stdout + created.stderr
    session = requests.Session()
    session.headers["Authorization"] = f"Token {cluster_token}"
    experiment = session.get(f"{cluster.url}/api/v1/experiments/", timeout=30).json()["results"][0]
    assert experiment["state"] == "ERROR"
    (trial,) = session.get(
        f"{cluster.url}/api/v1/experiments/{experiment['id']}/trials/", timeout=30
    ).json()["results"]
    assert trial["state"] == "ERROR" and trial["restarts"] == 1 and trial["run_id"] == 2
    lines = session.get(f"{cluster.url}/api/v1/trials/{trial['id']}/logs/", timeout=30).json()[
        "results"
    ]
    messages = [line["message"] for line in lines]
    assert messages.count("about to fail") == 2
    assert "[headway] run 2 exited with code 3" in messages
