"""Leases with a real worker: one cut off from the master stops its trial itself after the
outage tolerance, one cut off while the master serves other hosts is fenced when it comes back,
and a killed worker leaves no live rows.

The worker (a REST-only host agent) reaches the master through a TCP relay in this process;
cutting the relay stops every byte both ways while the connections stay open (a partition, not
a refused connection), and restoring it lets the held bytes through. Short lease settings,
conditions waited for with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.helpers import process_alive, start_worker, wait_for
from tests.workers.test_faults_worker_death import FIXTURE, _children, _group_members

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEARTBEAT, LEASE, MARGIN, GRACE, TOLERANCE = 1.0, 5.0, 4.0, 2.0, 12.0
LEASE_ENV = {
    "HEADWAY_HOST_HEARTBEAT_SECONDS": f"{HEARTBEAT:g}",
    "HEADWAY_HOST_TIMEOUT_SECONDS": "2",
    "HEADWAY_LEASE_SECONDS": f"{LEASE:g}",
    "HEADWAY_LEASE_MARGIN_SECONDS": f"{MARGIN:g}",
    "HEADWAY_KILL_GRACE_SECONDS": f"{GRACE:g}",
    "HEADWAY_OUTAGE_TOLERANCE_SECONDS": f"{TOLERANCE:g}",
    "HEADWAY_REAPER_INTERVAL_SECONDS": "1",
    "HEADWAY_SLOTS": "1",
}


class Relay:
    """A TCP relay to ``target`` on a free local port; ``cut()`` holds every byte (both ways, and
    new connections' too) until ``restore()``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self.closed.is_set():
            self.flowing.wait()  # cut: the bytes wait in the kernel's buffers
            try:
                data = source.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                sink.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        self.flowing.clear()

    def restore(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.closed.set()
        self.flowing.set()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def relayed(url: str, port: int) -> str:
    """``url`` (the master's URL) with its host and port replaced by the relay's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{credentials}127.0.0.1:{port}"))


@pytest.fixture
def lease_worker(cluster, cluster_token, settings, tmp_path):
    """Start a one-slot worker of a pool of its own whose calls to the master go through a
    ``Relay``; yields ``(worker, host name, relay)``; everything is stopped at teardown."""
    pool = f"headway-lease-{uuid.uuid4().hex[:8]}"
    name = f"{pool}-host"
    settings.CELERY_TASK_DEFAULT_QUEUE = pool
    # This process is the registry: its heartbeat answers give the worker these timings.
    settings.HEADWAY_HOST_HEARTBEAT_SECONDS = HEARTBEAT
    settings.HEADWAY_LEASE_SECONDS = LEASE
    settings.HEADWAY_LEASE_MARGIN_SECONDS = MARGIN
    settings.HEADWAY_KILL_GRACE_SECONDS = GRACE
    settings.HEADWAY_HOST_TIMEOUT_SECONDS = 2.0
    settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS = TOLERANCE
    master = urlsplit(cluster.url)
    relay = Relay((master.hostname or "127.0.0.1", int(master.port or 80)))
    env = dict(
        cluster.env,
        **LEASE_ENV,
        HEADWAY_QUEUE=pool,
        HEADWAY_HOST_NAME=name,
        HEADWAY_MASTER_URL=relayed(cluster.url, relay.port),
    )
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, pool, name)
    try:
        yield worker, name, relay, log
    finally:
        relay.restore()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        relay.close()


def trial_group(worker) -> int:
    """The process group of the one trial the worker runs (its guard's pid)."""
    guards = [pid for pid in _children(worker.pid) if os.getpgid(pid) == pid]
    assert len(guards) == 1, guards
    return guards[0]


def test_a_worker_cut_off_from_the_master_stops_its_trial_itself_after_the_tolerance(
    lease_worker, cluster_api, cluster_token
):
    from registry import lifecycle
    from registry.models import TrialLog, TrialRun, WorkerHost

    worker, name, relay, log = lease_worker
    wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 120, "the host")
    trial = cluster_api.submit(
        FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 30.0}
    )
    cluster_api.wait_trial(trial["id"], lambda t: t["run_state"] == "RUNNING", "running")
    group = trial_group(worker)
    assert _group_members(group)

    relay.cut()
    cut_at = time.monotonic()
    # The only host of its namespace is silent: to the registry that may be its own outage, so
    # a lease plus the margin later the run still counts and the host still runs it.
    time.sleep(LEASE + MARGIN + 1)
    assert lifecycle.reap_lost_runs() == []
    assert _group_members(group)
    # The host stops it itself once the outage tolerance passed since its last renewal.
    wait_for(lambda: not _group_members(group), TOLERANCE + GRACE + 10, "the trial to be stopped")
    assert time.monotonic() - cut_at <= TOLERANCE + GRACE + 10
    assert f"could not renew the lease of trial {trial['id']} run 1" in log.read_text()

    # The registry's reaper (this process) ends it once the tolerance plus the margin passed.
    wait_for(lambda: lifecycle.reap_lost_runs(), TOLERANCE + MARGIN + 30, "the run to be reaped")
    run = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
    assert run.state == "EXITED" and run.exit_code is None
    after = cluster_api.trial(trial["id"])
    assert after["state"] == "ACTIVE" and after["restarts"] == 0 and after["run_id"] == 2
    assert after["scheduling_message"].startswith(f"host {name} lost")

    relay.restore()
    # Back in touch: the worker writes why it stopped the trial in the trial's log.
    wait_for(
        lambda: TrialLog.objects.filter(
            trial_id=trial["id"], run_id=1, message__contains="could not renew the lease"
        ).exists(),
        120,
        "the worker's line in the trial log",
    )
    lifecycle.experiment_kill(experiment_id=trial["experiment_id"])


class OthersBeat:
    """Another host of ``namespace`` (no slots) heartbeating through the master's code every
    heartbeat, from a thread: the master serves the namespace while this host is cut off."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import connection
        from django.utils import timezone

        from registry.lifecycle import host_agent
        from registry.pools import DEFAULT_POOL

        try:
            while not self.stop.wait(HEARTBEAT / 2):
                host_agent.host_beat(
                    f"{self.namespace}-others",
                    pool=DEFAULT_POOL,
                    namespace=self.namespace,
                    devices=[],
                    gpu=False,
                    started_at=timezone.now(),
                )
        finally:
            connection.close()

    def __enter__(self) -> OthersBeat:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


def test_a_worker_cut_off_while_the_master_serves_others_is_fenced_when_back(
    lease_worker, cluster_api, cluster_token, settings
):
    from registry import lifecycle
    from registry.models import TrialRun, WorkerHost

    settings.HEADWAY_OUTAGE_TOLERANCE_SECONDS = 600.0  # the cut-off copy outlives the partition
    worker, name, relay, log = lease_worker
    namespace = settings.CELERY_TASK_DEFAULT_QUEUE
    wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 120, "the host")
    trial = cluster_api.submit(
        FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 30.0}
    )
    cluster_api.wait_trial(trial["id"], lambda t: t["run_state"] == "RUNNING", "running")
    group = trial_group(worker)
    with OthersBeat(namespace):
        time.sleep(2 * HEARTBEAT)  # the worker adopted the master's tolerance meanwhile
        relay.cut()
        # The master serves the others: the run is lost after a lease plus the margin.
        wait_for(lambda: lifecycle.reap_lost_runs(), LEASE + MARGIN + 30, "the run to be reaped")
        after = cluster_api.trial(trial["id"])
        assert after["state"] == "ACTIVE" and after["restarts"] == 0 and after["run_id"] == 2
        # The cut-off host cannot tell: its copy goes on, and it takes nothing new.
        assert _group_members(group)
        assert not WorkerHost.objects.get(name=name).is_alive()

        relay.restore()
        # Back in touch: told its run is stale, it stops the copy before run 2 is placed there.
        second = TrialRun.objects.filter(trial_id=trial["id"], run_id=2)
        wait_for(lambda: second.filter(state__in=["STARTING", "RUNNING"]).exists(), 120, "run 2")
        assert not _group_members(group)
        assert second.get().host.name == name
    assert "the master ended trial" in log.read_text()
    lifecycle.experiment_kill(experiment_id=trial["experiment_id"])


def test_a_killed_worker_leaves_no_running_or_queued_rows(lease_worker, cluster_api, cluster_token):
    from registry import lifecycle
    from registry.models import RunShare, TrialRun, WorkerHost

    worker, name, _, _ = lease_worker
    wait_for(lambda: WorkerHost.objects.filter(name=name).alive().exists(), 120, "the host")
    trial = cluster_api.submit(
        FIXTURE / "exp.yaml", FIXTURE, hyperparameters={"lr": 0.5, "sleep": 30.0}
    )
    cluster_api.wait_trial(trial["id"], lambda t: t["run_state"] == "RUNNING", "running")
    group = trial_group(worker)
    os.killpg(worker.pid, signal.SIGKILL)  # the worker and its beat; the guard notices
    worker.wait()
    wait_for(lambda: not _group_members(group), 30, "the trial to stop after its worker")
    assert not process_alive(worker.pid)

    def settled() -> bool:
        lifecycle.reap_lost_runs()  # the registry's reaper (the worker's beat died with it)
        from registry import scheduling

        scheduling.place_queued_runs()
        live = ["STARTING", "RUNNING"]
        placed_here = TrialRun.objects.filter(host__name=name).exclude(state="EXITED")
        return not (
            placed_here.exists()
            or RunShare.objects.filter(host__name=name, state__in=["QUEUED", *live]).exists()
        )

    wait_for(settled, LEASE + MARGIN + 60, "no live row on the killed worker's host")
    first = TrialRun.objects.get(trial_id=trial["id"], run_id=1)
    assert first.exit_code is None
    assert cluster_api.trial(trial["id"])["restarts"] == 0
    lifecycle.experiment_kill(experiment_id=trial["experiment_id"])
