"""Leases on real hosts: a partitioned share host (fenced) and a killed non-chief worker.

One cluster for the module (tests/netns_cluster.py): a master and hosts ``a`` and ``b`` with 2
CPU slots each in network namespaces. Its timings are the defaults for its 1 s heartbeat and 3 s
kill grace (lease 10 s, margin 8 s, host timeout 6 s): every process of the cluster agrees on
them. A 4-slot Core API trial spans both hosts; a sampler thread records, for the whole test,
the ranks running in each host's namespace and the slots the master counts in use there.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter

import pytest

from e2e_tests.workers.test_distributed_e2e import CORE_API, core_api_config, submit
from tests.helpers import is_rank_wrapper, wait_for
from tests.netns_cluster import NetnsCluster, require_netns

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 600  # seconds per wait: two hosts of torch processes on a small shared machine
SLOTS = 2
HEARTBEAT, LEASE, MARGIN, GRACE = 1.0, 10.0, 8.0, 3.0  # the cluster's (defaults derived)
SLACK = 10.0  # a loaded 2-core machine: the watchdog's tick, signal delivery, process exit
STEPS = [4 * (epoch + 1) for epoch in range(6)]  # the example: 6 epochs of 4 global batches


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    require_netns()
    cluster = NetnsCluster(tmp_path_factory.mktemp("leases"), hosts=("a", "b"), slots=SLOTS)
    with cluster:
        cluster.wait_hosts_alive()
        yield cluster


def rank_pids(netns: NetnsCluster, host: str, trial_id: int, run_id: int | None = None) -> list:
    """Live rank processes (torchrun's workers: ``LOCAL_RANK`` set) of the trial on ``host``."""
    return [
        pid
        for pid, environ in netns.trial_processes(host, trial_id)
        if (run_id is None or f"HEADWAY_RUN_ID={run_id}".encode() in environ)
        and any(item.startswith(b"LOCAL_RANK=") for item in environ)
        and not is_rank_wrapper(pid)
    ]


class Sampler:
    """A thread recording, about twice a second, each host's running ranks of one trial and the
    master's count of slots in use there; ``worst()`` is the largest of each."""

    def __init__(self, netns: NetnsCluster, trial_id: int) -> None:
        self.netns, self.trial_id = netns, trial_id
        self.ranks: Counter = Counter()
        self.in_use: Counter = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for host in self.netns.names:
                ranks = len(rank_pids(self.netns, host, self.trial_id))
                self.ranks[host] = max(self.ranks[host], ranks)
                try:
                    in_use = self.netns.slots_in_use(host)
                except Exception:  # the master busy for a moment: the next sample counts
                    continue
                self.in_use[host] = max(self.in_use[host], in_use)
            self.samples += 1


def share_host(netns: NetnsCluster, trial_id: int, run_id: int) -> str:
    """The host of node 1 (the non-chief part) of the run."""
    return netns.psql(
        "SELECT h.name FROM registry_runshare s JOIN registry_trialrun r ON r.id = s.run_id"
        " JOIN registry_workerhost h ON h.id = s.host_id"
        f" WHERE r.trial_id = {int(trial_id)} AND r.run_id = {int(run_id)}"
    ).strip()


def live_rows(netns: NetnsCluster, host: str) -> int:
    """Runs and shares on ``host`` that are not EXITED (QUEUED, STARTING or RUNNING)."""
    runs = netns.psql(
        "SELECT count(*) FROM registry_trialrun r JOIN registry_workerhost h ON h.id = r.host_id"
        f" WHERE h.name = '{host}' AND r.state <> 'EXITED'"
    )
    shares = netns.psql(
        "SELECT count(*) FROM registry_runshare s JOIN registry_workerhost h ON h.id = s.host_id"
        f" WHERE h.name = '{host}' AND s.state <> 'EXITED'"
    )
    return int(runs) + int(shares)


def start_trial(netns: NetnsCluster, sleep: float) -> dict:
    config = core_api_config(4, sleep=sleep)  # max_restarts: 0: a counted restart is an ERROR
    config["checkpoint_storage"] = netns.s3_storage(prefix=f"lease-{uuid.uuid4().hex[:8]}")
    trial = submit(netns.api, CORE_API, config)
    netns.api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 4, "training", TIMEOUT)
    return trial


def finished(netns: NetnsCluster, trial: dict) -> dict:
    """Wait for the trial's end; check it completed, no restart counted, each step stored once."""
    api = netns.api
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-60:]
    assert done["restarts"] == 0 and done["run_id"] >= 2
    steps, _ = api.series(trial["id"], "training", "loss")
    assert steps == STEPS  # none duplicated, none missing
    return done


def test_a_share_host_cut_off_for_60_s_is_fenced_and_never_double_booked(netns):
    api = netns.api
    trial = start_trial(netns, sleep=3.0)
    with Sampler(netns, trial["id"]) as sampler:
        cut = share_host(netns, trial["id"], 1)
        assert rank_pids(netns, cut, trial["id"], 1)
        netns.link_down(cut)
        down_at = time.monotonic()
        try:
            # The master serves the other host: it re-queues the run once the share's lease plus
            # the margin passed (not counted), and says so.
            lost = api.wait_trial(
                trial["id"], lambda t: t["run_id"] >= 2, "the run re-queued", TIMEOUT
            )
            assert lost["restarts"] == 0 and lost["state"] == "ACTIVE"
            assert f"host {cut} lost" in lost["scheduling_message"]
            assert "not counted as a restart" in lost["scheduling_message"]
            # The cut-off host cannot tell its partition from an outage of the master: its old
            # ranks go on (the outage tolerance, 10 min, outlasts the partition).
            assert rank_pids(netns, cut, trial["id"], 1)
            time.sleep(max(0.0, 60 - (time.monotonic() - down_at)))  # the partition lasts 60 s
        finally:
            netns.link_up(cut)
        # Back in touch: told its share is stale, it stops those ranks (fenced meanwhile: the
        # run's new ranks never share its slots with them, which the sampler checks).
        wait_for(
            lambda: not rank_pids(netns, cut, trial["id"], 1),
            TIMEOUT,
            "the cut-off host's stale ranks to stop",
        )
        finished(netns, trial)
    assert sampler.samples > 20
    assert max(sampler.ranks.values()) <= SLOTS, sampler.ranks
    assert max(sampler.in_use.values()) <= SLOTS, sampler.in_use
    # The cut-off host said why, in the trial's log once it could reach the master again.
    wait_for(
        lambda: any("the master ended" in line for line in api.logs(trial["id"])),
        TIMEOUT,
        "the cut-off host's line in the trial's log",
    )


def test_sigkill_of_a_non_chief_worker_requeues_without_a_restart(netns):
    api = netns.api
    trial = start_trial(netns, sleep=2.0)
    with Sampler(netns, trial["id"]) as sampler:
        victim = share_host(netns, trial["id"], 1)
        netns.kill_worker(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        try:
            # Found lost once its lease plus the margin passed; said within two heartbeats.
            lost = api.wait_trial(
                trial["id"],
                lambda t: f"host {victim} lost" in t["scheduling_message"],
                "the loss to be said",
                LEASE + MARGIN + 2 * HEARTBEAT + SLACK,
            )
            assert time.monotonic() - killed_at <= LEASE + MARGIN + 2 * HEARTBEAT + SLACK
            assert lost["restarts"] == 0 and lost["state"] == "ACTIVE" and lost["run_id"] >= 2
            assert "not counted as a restart" in lost["scheduling_message"]
            # A killed worker leaves no RUNNING or QUEUED row of its host behind.
            wait_for(lambda: live_rows(netns, victim) == 0, TIMEOUT, "no live row on it")
        finally:
            netns.start_worker(victim)
        finished(netns, trial)
    assert max(sampler.ranks.values()) <= SLOTS, sampler.ranks
    assert max(sampler.in_use.values()) <= SLOTS, sampler.in_use
