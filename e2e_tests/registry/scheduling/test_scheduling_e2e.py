"""Slot scheduling with real workers: two worker processes on this machine, each registering a
host of 2 CPU slots under its own name, and a Core API script that sleeps and reports.

Every assertion reads the runs' recorded ``started_at`` / ``ended_at`` (and host, devices): the
claim sets the first once the run holds its slots, the exit sets the second before they are
free again, so overlapping intervals are runs that held slots at the same time.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers import renew_host_tokens, start_host_workers, stop_workers, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOTS_PER_HOST = 2

SCRIPT = """
import json, os, time
import headway as det

# One process even on a 2-slot trial: say so (core.init() refuses several slots without a
# launcher, as Determined does).
with det.core.init(distributed=det.core.DistributedContext.single()) as ctx:
    hparams = det.get_cluster_info().trial.hparams
    print(json.dumps({"slot_ids": os.environ.get("HEADWAY_SLOT_IDS")}), flush=True)
    for op in ctx.searcher.operations():
        time.sleep(float(hparams["sleep"]))
        ctx.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
"""


def config(trials: int, sleep: float, **extra) -> dict:
    searcher: dict = {"name": "random", "metric": "loss", "max_length": 1, "max_trials": trials}
    if trials == 1:
        searcher = {"name": "single", "metric": "loss", "max_length": 1}
    searcher.update(extra.pop("searcher", {}))
    return {
        "name": "scheduling",
        "entrypoint": "python train.py",
        "hyperparameters": {"x": {"type": "double", "minval": 0, "maxval": 1}, "sleep": sleep},
        "searcher": searcher,
        "max_restarts": 0,
        **extra,
    }


@pytest.fixture(scope="module")
def _hosts(cluster, tmp_path_factory):
    """Two workers of their own pool (queue), hosts ``<pool>-a`` and ``<pool>-b``, 2 slots each."""
    base = tmp_path_factory.mktemp("scheduling")
    pool = f"headway-sched-{uuid.uuid4().hex[:8]}"
    workers = start_host_workers(cluster.env, base, pool, SLOTS_PER_HOST)
    yield pool, base, workers
    stop_workers(workers)


@pytest.fixture
def hosts(cluster_api, _hosts, settings):
    """Runs created by this test go to the two hosts' pool; waits until both heartbeat (a
    transactional test's flush deletes host rows; the next heartbeat recreates them)."""
    from registry.models import WorkerHost

    pool, base, workers = _hosts
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    renew_host_tokens(workers)  # the last test's flush deleted them
    wait_for(
        lambda: WorkerHost.objects.filter(namespace=pool).alive().count() == 2,
        120,
        f"both hosts to register (logs in {base})",
    )
    return pool


@pytest.fixture
def model_dir(tmp_path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text(SCRIPT)
    return tmp_path / "model"


def submit(cluster_api, model_dir: Path, body: dict) -> int:
    path = model_dir.parent / f"exp-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(body))
    return cluster_api.submit(path, model_dir)["experiment_id"]


def wait_completed(cluster_api, experiment_id: int) -> dict:
    def done():
        experiment = cluster_api.get(f"experiments/{experiment_id}/")
        return experiment if experiment["state"] in ("COMPLETED", "CANCELED", "ERROR") else None

    experiment = wait_for(done, 300, f"experiment {experiment_id} to end")
    assert experiment["state"] == "COMPLETED", experiment
    return experiment


def runs_of(*experiment_ids: int) -> list[dict]:
    from registry.models import TrialRun

    runs = TrialRun.objects.filter(
        trial__experiment_id__in=experiment_ids, started_at__isnull=False
    )
    return list(
        runs.values(
            "trial_id", "host__name", "slots", "devices", "started_at", "ended_at", "exit_code"
        )
    )


def max_overlap(runs: list[dict]) -> int:
    """The most runs whose [started_at, ended_at] intervals overlap, weighted by slots."""
    events = [(r["started_at"], 1, r["slots"]) for r in runs]
    events += [(r["ended_at"], 0, -r["slots"]) for r in runs]  # ends first on a tie
    most = current = 0
    for _, _, delta in sorted(events):
        current += delta
        most = max(most, current)
    return most


def test_eight_one_slot_trials_never_exceed_the_slots_of_the_cluster_or_a_host(
    cluster_api, hosts, model_dir
):
    experiment_id = submit(cluster_api, model_dir, config(8, sleep=2.0))
    wait_completed(cluster_api, experiment_id)
    runs = runs_of(experiment_id)
    assert len(runs) == 8 and all(r["exit_code"] == 0 and r["slots"] == 1 for r in runs)
    by_host: dict[str, list[dict]] = {}
    for run in runs:
        by_host.setdefault(run["host__name"], []).append(run)
    assert set(by_host) == {f"{hosts}-a", f"{hosts}-b"}
    assert max_overlap(runs) <= 2 * SLOTS_PER_HOST
    for host_runs in by_host.values():
        assert max_overlap(host_runs) <= SLOTS_PER_HOST
        for run in host_runs:  # runs on one host at the same time hold different devices
            together = [o for o in host_runs if overlaps(o, run) and o is not run]
            assert all(set(o["devices"]).isdisjoint(run["devices"]) for o in together)
    listed = {h["name"]: h for h in cluster_api.get("workers/")["results"]}
    assert all(listed[name]["alive"] for name in by_host)


def overlaps(a: dict, b: dict) -> bool:
    return a["started_at"] < b["ended_at"] and b["started_at"] < a["ended_at"]


def test_a_two_slot_trial_waits_for_two_free_slots_on_one_host(cluster_api, hosts, model_dir):
    # Three one-slot runs take a-0, a-1 and b-0 (best fit) before the two-slot trial is queued.
    narrow = submit(cluster_api, model_dir, config(3, sleep=3.0))
    wide = submit(cluster_api, model_dir, config(1, sleep=1.0, resources={"slots_per_trial": 2}))
    wait_completed(cluster_api, narrow)
    wait_completed(cluster_api, wide)
    (two,) = runs_of(wide)
    ones = runs_of(narrow)
    assert two["slots"] == 2 and sorted(two["devices"]) == ["cpu0", "cpu1"]
    same_host = [r for r in ones if r["host__name"] == two["host__name"]]
    assert not any(overlaps(r, two) for r in same_host)  # it had the host to itself
    assert two["started_at"] >= min(r["ended_at"] for r in ones)  # it waited for slots
    (trial,) = cluster_api.get(f"experiments/{wide}/trials/")["results"]
    assert '{"slot_ids": "cpu0,cpu1"}' in cluster_api.logs(trial["id"])


def test_max_concurrent_trials_is_honoured(cluster_api, hosts, model_dir):
    body = config(6, sleep=1.0, searcher={"max_concurrent_trials": 2})
    experiment_id = submit(cluster_api, model_dir, body)
    wait_completed(cluster_api, experiment_id)
    runs = runs_of(experiment_id)
    assert len(runs) == 6
    assert max_overlap(runs) <= 2
