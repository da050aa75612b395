"""Host tokens on real hosts: REST-only agents, their scope, their revocation.

One cluster for the module (tests/netns_cluster.py): a master (PostgreSQL, Redis, moto S3, web
server, master worker) and hosts ``a`` and ``b`` with 2 CPU slots each in network namespaces,
a 1 s heartbeat, a 3 s kill grace and a 30 s lease (which the hosts adopt from the master).
Each host runs ``python -m workers`` with only the master's URL, its host token (issued by
``manage.py headway_host_token NAME --create`` on the master), the broker and its folders: no
``SECRET_KEY``, and a ``DATABASE_URL`` on an address no route leads to from its namespace.

- A trial over both hosts completes: the hosts never open the database.
- A host's token reaches only the runs placed on that host (another host's run is 403, over
  real HTTP from inside the host's namespace) and no user route (403).
- Revoking a host's token while its trial runs: the agent's next heartbeat is refused (401),
  every lease of that host ends (``workers.leases.expire_all``) and its trial processes are
  stopped (SIGTERM, SIGKILL after the kill grace), long before the lease would have ended
  (the lease's end, and the guard's backstop after it, would stop them only after 30 s); the
  master re-queues the run as lost (not counted as a restart) once the lease plus its margin
  passed, and the trial completes on the other host.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from urllib.parse import urlsplit

import pytest

from e2e_tests.workers.test_distributed_e2e import CORE_API, core_api_config, submit
from e2e_tests.workers.test_leases_netns import finished
from tests.helpers import wait_for
from tests.netns_cluster import UNREACHABLE_DATABASE_URL, NetnsCluster, require_netns

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 600  # seconds per wait: two hosts of torch processes on a small shared machine
HEARTBEAT, GRACE, LEASE = 1.0, 3.0, 30.0  # the cluster's timing (seconds)
SLACK = 10.0  # a loaded 2-core machine: the watchdog's tick, signal delivery, process exit
# HEARTBEAT + GRACE + SLACK stays well below LEASE: processes gone by then were stopped for the
# refused token, not by the lease's end.

# Run inside a host's namespace: the requests of stdin's JSON ``[[method, path, body], ...]``
# to the master with the key in PROBE_KEY; prints ``[[status, body], ...]``.
PROBE = r"""
import json, os, sys, urllib.error, urllib.request
url, key = os.environ["PROBE_URL"], os.environ["PROBE_KEY"]
out = []
for method, path, body in json.load(sys.stdin):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": "Token " + key, "Content-Type": "application/json"}
    request = urllib.request.Request(url + "/api/v1/" + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            out.append([answer.status, answer.read().decode(errors="replace")[:1000]])
    except urllib.error.HTTPError as error:
        out.append([error.code, error.read().decode(errors="replace")[:1000]])
print(json.dumps(out))
"""

# Inside a namespace: try a TCP connection to host:port; prints "connected" or "failed: ...".
CONNECT = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as error:
    print(f"failed: {error}")
"""


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    require_netns()
    cluster = NetnsCluster(
        tmp_path_factory.mktemp("host-tokens"),
        hosts=("a", "b"),
        slots=2,
        master_env={"HEADWAY_LEASE_SECONDS": f"{LEASE:g}"},
    )
    with cluster:
        cluster.wait_hosts_alive()
        yield cluster


def in_namespace(netns: NetnsCluster, host: str, code: str, *args: str, **kw) -> str:
    """Run Python ``code`` inside host ``host``'s network namespace; its stdout."""
    namespace = netns.hosts[host].namespace
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def probe(netns: NetnsCluster, host: str, key: str, calls: list[tuple]) -> list[list]:
    """Send ``calls`` (``(method, path, body)``) to the master over HTTP from inside host
    ``host``'s namespace with ``key``; the ``[status, body]`` answers."""
    env = {"PATH": os.environ["PATH"], "PROBE_URL": netns.url, "PROBE_KEY": key}
    return json.loads(in_namespace(netns, host, PROBE, input=json.dumps(calls), env=env))


def statuses(answers: list[list]) -> list[int]:
    """The status codes of ``probe``'s answers."""
    return [status for status, _ in answers]


def run_host(netns: NetnsCluster, trial_id: int, run_id: int) -> str:
    """The host the run is placed on (the master's database)."""
    return netns.psql(
        "SELECT h.name FROM registry_trialrun r JOIN registry_workerhost h ON h.id = r.host_id"
        f" WHERE r.trial_id = {int(trial_id)} AND r.run_id = {int(run_id)}"
    ).strip()


def trial_pids(netns: NetnsCluster, host: str, trial_id: int) -> list[int]:
    """Live processes of the trial in ``host``'s namespace (guard, launcher, ranks)."""
    return [pid for pid, _ in netns.trial_processes(host, trial_id)]


def running_trial(netns: NetnsCluster, slots: int, sleep: float) -> dict:
    """Submit a Core API trial of ``slots`` slots (``sleep`` s per batch) and wait until its
    run is RUNNING and has trained (and checkpointed) one epoch."""
    config = core_api_config(slots, sleep=sleep)
    config["checkpoint_storage"] = netns.s3_storage(prefix=f"tokens-{uuid.uuid4().hex[:8]}")
    trial = submit(netns.api, CORE_API, config)
    return netns.api.wait_trial(
        trial["id"],
        lambda t: t["run_state"] == "RUNNING" and t["steps_completed"] >= 4,
        "the trial to train",
        TIMEOUT,
    )


def test_a_trial_completes_on_hosts_whose_agents_cannot_reach_the_database(netns):
    database = urlsplit(UNREACHABLE_DATABASE_URL)
    for name, host in netns.hosts.items():
        env = netns.agent_environ(name)
        assert env["DATABASE_URL"] == UNREACHABLE_DATABASE_URL
        assert "SECRET_KEY" not in env
        assert env["HEADWAY_HOST_TOKEN"] == host.token and host.token.startswith("hwh_")
        assert env["HEADWAY_MASTER"] == netns.url
        # No route leads to that address from the host: opening it would fail at once.
        tried = in_namespace(netns, name, CONNECT, str(database.hostname), str(database.port))
        assert tried.startswith("failed:"), tried
    api = netns.api
    config = core_api_config(4, sleep=0.0)  # 2 slots per host: a run over both
    config["checkpoint_storage"] = netns.s3_storage(prefix=f"nodb-{uuid.uuid4().hex[:8]}")
    trial = submit(api, CORE_API, config)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-60:]
    assert done["restarts"] == 0
    shares = netns.psql(
        "SELECT h.name FROM registry_runshare s JOIN registry_trialrun r ON r.id = s.run_id"
        " JOIN registry_workerhost h ON h.id = s.host_id"
        f" WHERE r.trial_id = {int(trial['id'])} AND r.run_id = 1"
    ).split()
    assert {run_host(netns, trial["id"], 1), *shares} == {"a", "b"}
    for name, host in netns.hosts.items():
        log = host.log.read_text(errors="replace")
        # Nothing in the agent's log about that database (it never tried it).
        assert str(database.hostname) not in log, name
        assert "network is unreachable" not in log.lower(), name


def test_a_host_token_reaches_only_its_own_runs_and_no_user_route(netns):
    trial = running_trial(netns, slots=2, sleep=1.0)  # 2 slots: one host
    tid = trial["id"]
    owner = run_host(netns, tid, 1)
    (other,) = set(netns.names) - {owner}
    run = f"host-agent/trials/{tid}/runs/1/"
    # The owner's key reads its own run (the requests below are well formed).
    own = probe(netns, owner, netns.hosts[owner].token, [("GET", run + "spec/", None)])
    assert statuses(own) == [200], own
    # The other host's key, from the other host: every route of that run is refused.
    forged = [
        ("GET", run + "spec/", None),
        ("GET", run + "token/", None),
        ("GET", run + "model-definition/", None),
        ("GET", run + "shares/", None),
        ("POST", run + "claim/", {"worker": "intruder"}),
        ("POST", run + "heartbeat/", None),
        ("POST", run + "logs/", {"lines": [{"message": "forged line"}]}),
        ("POST", run + "preempt/", None),
        ("POST", run + "exit/", {"exit_code": 1, "reason": "forged"}),
    ]
    answers = probe(netns, other, netns.hosts[other].token, forged)
    assert statuses(answers) == [403] * len(forged), answers
    # Its heartbeat may list that run: the master renews only the caller's own leases.
    beat = {
        "pool": "default",
        "devices": ["cpu0", "cpu1"],
        "gpu": False,
        "started_at": "2026-01-01T00:00:00Z",
        "runs": [{"trial_id": tid, "run_id": 1}],
    }
    ((status, body),) = probe(
        netns, other, netns.hosts[other].token, [("POST", "host-agent/heartbeat/", beat)]
    )
    assert status == 200 and json.loads(body)["renewed"] == 0, body
    # No user or admin route takes a host token.
    user_routes = [
        ("GET", "experiments/", None),
        ("GET", f"trials/{tid}/", None),
        ("GET", f"trials/{tid}/logs/", None),
        ("GET", "workers/", None),
        ("GET", "host-tokens/", None),
        ("POST", f"trials/{tid}/kill", None),
    ]
    for host in (owner, other):
        answers = probe(netns, host, netns.hosts[host].token, user_routes)
        assert statuses(answers) == [403] * len(user_routes), answers
    # None of it reached the trial: it completes, its log holds no forged line.
    done = netns.api.wait_trial(
        tid, lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    lines = netns.api.logs(tid)
    assert done["state"] == "COMPLETED" and done["run_id"] == 1, lines[-60:]
    assert not [line for line in lines if "forged" in line]


def test_revoking_a_running_hosts_token_stops_its_trial_and_requeues_the_run_as_lost(netns):
    api = netns.api
    trial = running_trial(netns, slots=2, sleep=3.0)
    tid = trial["id"]
    victim = run_host(netns, tid, 1)
    (other,) = set(netns.names) - {victim}
    old_key = netns.hosts[victim].token
    assert trial_pids(netns, victim, tid)
    log_start = netns.hosts[victim].log.stat().st_size
    netns.revoke_token(victim)
    try:
        # The agent's next heartbeat is refused: its leases end, its trial processes stop
        # (SIGTERM now, SIGKILL after the kill grace).
        wait_for(
            lambda: not trial_pids(netns, victim, tid),
            HEARTBEAT + GRACE + SLACK,
            "the revoked host's trial processes to stop",
        )
        # The agent said why, and supervised the processes to their end: their exit could not
        # be reported with the revoked token.
        refused = f"the master refused host {victim}'s token (revoked?)"

        def agent_done() -> str:
            log = netns.hosts[victim].log.read_bytes()[log_start:].decode(errors="replace")
            return log if f"trial {tid} run 1: exit code None not reported" in log else ""

        log = wait_for(agent_done, 60, "the agent's line on the unreported exit")
        assert f"trial {tid} run 1: {refused}" in log, log[-4000:]
        assert f"could not renew the lease of trial {tid}" not in log  # not the lease's end
        # The revoked key is refused (401) on the host's own run, from the host itself.
        own = [("GET", f"host-agent/trials/{tid}/runs/1/spec/", None)]
        answers = probe(netns, victim, old_key, own)
        assert statuses(answers) == [401], answers
        # The master re-queues the run once its lease plus the margin passed: lost, not a
        # restart; run 2 goes to the other host (the revoked one no longer heartbeats), which
        # clears the scheduling message at once: the trial's log keeps it.
        lost = api.wait_trial(tid, lambda t: t["run_id"] >= 2, "the run re-queued", TIMEOUT)
        assert lost["restarts"] == 0 and lost["state"] == "ACTIVE"
        # The trial's log says why run 1 ended (the master's words: the host's own lines
        # could not be sent with a revoked token; they are in the agent's log above).
        why = [line for line in api.logs(tid) if line.startswith("[headway] run 1: ")]
        assert len(why) == 1 and why[0].startswith(f"[headway] run 1: host {victim} lost"), why
        assert "not counted as a restart" in why[0]
        done = finished(netns, trial)
        assert run_host(netns, tid, done["run_id"]) == other
        assert not trial_pids(netns, victim, tid)
    finally:
        # Give the host a fresh token and a new agent for whatever runs next.
        netns.kill_worker(victim, signal.SIGTERM)
        worker = netns.hosts[victim].worker
        if worker is not None:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                netns.kill_worker(victim, signal.SIGKILL)
                worker.wait()
        netns.start_worker(victim)
        netns.wait_hosts_alive()
