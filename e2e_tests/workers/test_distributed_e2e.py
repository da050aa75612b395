"""Distributed trials through a real cluster: ``slots_per_trial`` > 1 on one host and over two.

One host: the cluster fixture's worker (2 CPU slots). Two hosts: two more worker processes on
this machine, each registering 2 CPU slots under its own name and queue, meeting over loopback
(``HEADWAY_HOST_ADDRESS=127.0.0.1``). Ranks use gloo on the CPU.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest
import yaml

from tests.helpers import (
    REPO,
    is_rank_wrapper,
    log_tail,
    process_alive,
    renew_host_tokens,
    start_host_workers,
    stop_workers,
    wait_for,
    wait_for_or_false,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORE_API = REPO / "examples" / "core_api_distributed"
DIGITS = REPO / "examples" / "digits"
SLOTS_PER_HOST = 2


def run_logs(cluster_api, trial_id: int, run_id: int) -> list[str]:
    """The trial's log lines written by run ``run_id`` (from its start line to the next one)."""
    return run_lines(cluster_api.logs(trial_id), run_id)


def run_lines(lines: list[str], run_id: int) -> list[str]:
    """The lines of ``lines`` (a trial's log) written by run ``run_id``."""
    out, inside = [], False
    for line in lines:
        if line.startswith("[headway] run ") and " of trial " in line and " starting " in line:
            inside = line.startswith(f"[headway] run {run_id} ")
        if inside:
            out.append(line)
    return out


def rank_json(lines: list[str], key: str) -> list[dict]:
    """JSON objects the ranks printed (``[rank=N] || {...}``) that contain ``key``."""
    found = []
    for line in lines:
        _, sep, body = line.partition("] || ")
        if sep and body.startswith("{") and f'"{key}"' in body:
            found.append(json.loads(body))
    return found


def processes_of(master_url: str, trial_id: int, *extra: bytes) -> list[int]:
    """PIDs of processes started for this trial (any run, any host of this machine) whose
    environment also holds every ``extra`` entry (e.g. ``b"RANK=3"``)."""
    wanted = {
        f"HEADWAY_MASTER={master_url}".encode(),
        f"HEADWAY_TRIAL_ID={trial_id}".encode(),
        *extra,
    }
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = set((entry / "environ").read_bytes().split(b"\0"))
            except OSError:
                continue
            if wanted <= environ:
                pids.append(int(entry.name))
    return pids


def rank_processes_of(master_url: str, trial_id: int, *extra: bytes) -> list[int]:
    """``processes_of`` without the ``wrap_rank`` process in front of each rank."""
    return [pid for pid in processes_of(master_url, trial_id, *extra) if not is_rank_wrapper(pid)]


def submit(cluster_api, directory: Path, config: dict) -> dict:
    path = directory.parent / f"exp-{uuid.uuid4().hex[:6]}.yaml"
    try:
        path.write_text(yaml.safe_dump(config))
        return cluster_api.submit(path, directory)
    finally:
        path.unlink()


def core_api_config(slots: int, **hparams) -> dict:
    config = yaml.safe_load((CORE_API / "distributed.yaml").read_text())
    config["resources"] = {"slots_per_trial": slots}
    config["hyperparameters"].update(hparams)
    return config


def epochs_by_rank(lines: list[str]) -> dict[int, list[int]]:
    by_rank: dict[int, list[int]] = {}
    for item in rank_json(lines, "epoch"):
        if "steps" in item:
            by_rank.setdefault(item["rank"], []).append(item["epoch"])
    return by_rank


def pause_then_activate(cluster_api, trial_id: int, after_steps: int) -> int:
    """Pause once ``after_steps`` are recorded; return the steps at the pause, then activate."""
    cluster_api.wait_trial(trial_id, lambda t: t["steps_completed"] >= after_steps, "training")
    cluster_api.post(f"trials/{trial_id}/pause")
    paused = cluster_api.wait_trial(
        trial_id, lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    cluster_api.post(f"trials/{trial_id}/activate")
    return paused["steps_completed"]


def check_core_api_resume(cluster_api, trial: dict, world: int, paused_steps: int) -> None:
    """Both runs: every rank trained the same epochs, run 2 started where run 1 stopped, and the
    chief reported each step once."""
    trial_id = trial["id"]
    first, second = run_logs(cluster_api, trial_id, 1), run_logs(cluster_api, trial_id, 2)
    for rank in range(world):
        assert any(f"Process {rank}, total {world}." in line for line in first)
    run1 = epochs_by_rank(first)
    assert sorted(run1) == list(range(world))
    assert len({tuple(epochs) for epochs in run1.values()}) == 1, run1  # same epochs everywhere
    last_epoch = run1[0][-1]
    assert paused_steps == 4 * (last_epoch + 1)  # the chief's checkpoint at the last epoch
    starts = rank_json(second, "start_epoch")
    assert sorted(s["rank"] for s in starts) == list(range(world))
    assert {s["start_epoch"] for s in starts} == {last_epoch + 1}
    run2 = epochs_by_rank(second)
    assert all(epochs == list(range(last_epoch + 1, 6)) for epochs in run2.values()), run2
    steps, _ = cluster_api.series(trial_id, "training", "loss")
    assert steps == [4 * (e + 1) for e in range(6)]  # once per step: only the chief reports
    checkpoints = cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]
    assert sorted(c["steps_completed"] for c in checkpoints) == steps  # one per epoch, chief only


# -- one host -------------------------------------------------------------------------------------


def test_core_api_script_on_two_slots_pauses_and_resumes_both_ranks_at_the_same_step(cluster_api):
    trial = submit(cluster_api, CORE_API, core_api_config(2, sleep=0.5))
    paused_steps = pause_then_activate(cluster_api, trial["id"], after_steps=8)
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0
    check_core_api_resume(cluster_api, trial, 2, paused_steps)
    assert any(line.startswith("[rank=1] || ") for line in cluster_api.logs(trial["id"]))


def test_a_rank_that_dies_takes_its_trial_down_and_max_restarts_restarts_both(cluster_api):
    config = core_api_config(2, sleep=0.5)
    config["max_restarts"] = 1
    trial = submit(cluster_api, CORE_API, config)
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 8, "training")
    (victim,) = rank_processes_of(cluster_api.url, trial["id"], b"RANK=1")
    (survivor,) = rank_processes_of(cluster_api.url, trial["id"], b"RANK=0")
    os.kill(victim, signal.SIGKILL)
    done = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end"
    )
    assert done["state"] == "COMPLETED" and done["run_id"] == 2 and done["restarts"] == 1, (
        done,
        cluster_api.logs(trial["id"])[-60:],
    )
    assert not process_alive(survivor)  # rank 0 of run 1 did not outlive its run
    starts = rank_json(run_logs(cluster_api, trial["id"], 2), "start_epoch")
    assert sorted(s["rank"] for s in starts) == [0, 1]
    assert len({s["start_epoch"] for s in starts}) == 1 and starts[0]["start_epoch"] >= 2
    # Every step from the restart on is reported once. (Steps the failed run reported just
    # before it was killed may be missing: its queued metrics die with it.)
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    resumed = 4 * starts[0]["start_epoch"]
    assert steps == sorted(set(steps)) and [s for s in steps if s > resumed] == list(
        range(resumed + 4, 25, 4)
    )


def test_digits_on_two_slots_matches_one_process_at_the_same_global_batch_size(cluster_api):
    # Two seeds per slot count (the same seeds on both sides: the same initial weights), all
    # submitted at once; the means are compared (one run's accuracy moves by about a point
    # with the seed on 359 validation images).
    config = yaml.safe_load((DIGITS / "const.yaml").read_text())
    config["max_restarts"] = 0
    trials = {}
    for slots in (1, 2):
        for seed in (1, 2):
            config["resources"] = {"slots_per_trial": slots}
            config["reproducibility"] = {"experiment_seed": seed}
            trials[slots, seed] = submit(cluster_api, DIGITS, config)["id"]
    accuracy: dict[int, list[float]] = {1: [], 2: []}
    for (slots, _), trial_id in trials.items():
        done = cluster_api.wait_trial(
            trial_id, lambda t: t["state"] in ("COMPLETED", "ERROR"), "digits", timeout=900
        )
        assert done["state"] == "COMPLETED", cluster_api.logs(trial_id)[-40:]
        steps, values = cluster_api.series(trial_id, "validation", "validation_accuracy")
        assert steps[-1] == 10 * 45  # the same number of global batches
        accuracy[slots].append(values[-1])
    print(f"digits validation accuracy by slots: {accuracy}")
    mean = {slots: sum(values) / len(values) for slots, values in accuracy.items()}
    assert mean[2] >= mean[1] - 0.01, accuracy


# -- two hosts ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def _two_hosts(cluster, tmp_path_factory):
    """Two workers of their own pool, hosts ``<pool>-a`` and ``<pool>-b`` with 2 slots each."""
    base = tmp_path_factory.mktemp("distributed")
    pool = f"headway-dist-{uuid.uuid4().hex[:8]}"
    workers = start_host_workers(
        cluster.env,
        base,
        pool,
        SLOTS_PER_HOST,
        HEADWAY_HOST_ADDRESS="127.0.0.1",
        HEADWAY_HEARTBEAT_SECONDS="1",
    )
    yield pool, base, workers
    stop_workers(workers)


@pytest.fixture
def two_hosts(cluster_api, _two_hosts, settings):
    """Runs created by this test go to the two hosts' pool (waits until both heartbeat)."""
    from registry.models import WorkerHost

    pool, base, workers = _two_hosts
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    renew_host_tokens(workers)  # the last test's flush deleted them
    registered = lambda: WorkerHost.objects.filter(namespace=pool).alive().count() == 2  # noqa: E731
    if not wait_for_or_false(registered, 120):
        exited = {w.host_name: w.poll() for w in workers if hasattr(w, "host_name")}
        pytest.fail(
            f"both hosts to register: agents' exit codes {exited}\n"
            + "\n".join(log_tail(path) for path in sorted(base.glob("*.log")))
        )
    return pool


def placement(trial_id: int, run_id: int) -> tuple[str, list[str]]:
    """(chief host, share hosts) of a run."""
    from registry.models import RunShare, TrialRun

    run = TrialRun.objects.select_related("host").get(trial_id=trial_id, run_id=run_id)
    shares = RunShare.objects.filter(run=run).order_by("node_rank")
    return run.host.name, [s.host.name for s in shares]


def test_four_slots_over_two_hosts_complete_and_resume_after_pause(cluster_api, two_hosts):
    trial = submit(cluster_api, CORE_API, core_api_config(4, sleep=0.5))
    paused_steps = pause_then_activate(cluster_api, trial["id"], after_steps=8)
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0
    for run_id in (1, 2):
        chief, others = placement(trial["id"], run_id)
        assert {chief, *others} == {f"{two_hosts}-a", f"{two_hosts}-b"} and len(others) == 1
    check_core_api_resume(cluster_api, trial, 4, paused_steps)
    assert not processes_of(cluster_api.url, trial["id"])


def test_digits_trial_on_four_slots_over_two_hosts_resumes_after_pause(cluster_api, two_hosts):
    config = yaml.safe_load((DIGITS / "const.yaml").read_text())
    config.update(
        max_restarts=0,
        resources={"slots_per_trial": 4},
        searcher={**config["searcher"], "max_length": {"batches": 135}},
        min_validation_period={"batches": 45},
        min_checkpoint_period={"batches": 45},
        scheduling_unit=15,
    )
    trial = submit(cluster_api, DIGITS, config)
    paused_steps = pause_then_activate(cluster_api, trial["id"], after_steps=45)
    assert paused_steps % 15 == 0 and 45 <= paused_steps < 135  # a report boundary
    done = cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "COMPLETED", "COMPLETED")
    assert done["run_id"] == 2 and done["restarts"] == 0
    chief, others = placement(trial["id"], 2)
    assert {chief, *others} == {f"{two_hosts}-a", f"{two_hosts}-b"}
    lines = cluster_api.logs(trial["id"])
    assert {line[: len("[rank=N]")] for line in lines if line.startswith("[rank=")} == {
        f"[rank={rank}]" for rank in range(4)
    }
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    assert steps == sorted(set(steps)) and steps[-1] == 135  # once per step, no overlap
    val_steps, accuracy = cluster_api.series(trial["id"], "validation", "validation_accuracy")
    assert val_steps[-1] == 135 and accuracy[-1] > 0.5
    assert not processes_of(cluster_api.url, trial["id"])


def test_killing_a_trial_over_two_hosts_stops_every_rank(cluster_api, two_hosts):
    trial = submit(cluster_api, CORE_API, core_api_config(4, sleep=1.0))
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 4, "training")
    assert len(rank_processes_of(cluster_api.url, trial["id"], b"LOCAL_RANK=0")) == 2  # both hosts
    cluster_api.post(f"trials/{trial['id']}/kill")
    cluster_api.wait_trial(trial["id"], lambda t: t["state"] == "CANCELED", "CANCELED", timeout=60)
    wait_for(lambda: not processes_of(cluster_api.url, trial["id"]), 30, "no rank left behind")


def test_a_rank_that_dies_on_one_host_stops_every_rank_and_the_group_restarts(
    cluster_api, two_hosts
):
    from registry.models import RunShare, TrialRun

    config = core_api_config(4, sleep=0.5)
    config["max_restarts"] = 1
    trial = submit(cluster_api, CORE_API, config)
    cluster_api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 8, "training")
    (victim,) = rank_processes_of(cluster_api.url, trial["id"], b"RANK=3")
    os.kill(victim, signal.SIGKILL)  # rank 3, on the second host, dies
    done = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the trial to end"
    )
    assert done["state"] == "COMPLETED" and done["run_id"] == 2 and done["restarts"] == 1, (
        done,
        cluster_api.logs(trial["id"])[-60:],
    )
    first = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
    assert first.exit_code not in (0, None)
    (share,) = RunShare.objects.filter(run=first)
    assert share.state == "EXITED" and share.exit_code not in (0, None)
    # Run 2 restarted every rank from the latest checkpoint.
    starts = rank_json(run_logs(cluster_api, trial["id"], 2), "start_epoch")
    assert sorted(s["rank"] for s in starts) == [0, 1, 2, 3]
    assert len({s["start_epoch"] for s in starts}) == 1 and starts[0]["start_epoch"] >= 2
    steps, _ = cluster_api.series(trial["id"], "training", "loss")
    resumed = 4 * starts[0]["start_epoch"]
    assert steps == sorted(set(steps)) and [s for s in steps if s > resumed] == list(
        range(resumed + 4, 25, 4)
    )
    wait_for(lambda: not processes_of(cluster_api.url, trial["id"]), 30, "no rank left behind")
