"""Master trouble on real hosts costs a running trial nothing.

One namespaced cluster for the module (tests/netns_cluster.py): a master (two web servers behind
deploy/nginx.conf as in docker-compose.yml, the master worker, its own PostgreSQL and Redis, a
moto S3) and host ``a`` with 2 CPU slots, on the default
timings for its 1 s heartbeat (lease 10 s, margin 8 s, outage tolerance 10 minutes). A 2-slot
Core API trial (torchrun) trains; after its 4th step a fault hits the master:

- every web server stopped for 3 minutes, then started (nginx answers 503 meanwhile);
- one of the two web servers killed (SIGKILL; it stays down until the trial ended);
- the master worker (lost-run reaper, beat) stopped past a lease plus its margin, then started;
- PostgreSQL stopped past a lease plus its margin, then started;
- Redis (the broker) stopped past a lease plus its margin, then started with none of its
  messages;
- the host agent SIGKILLed and started again 5 s later (it re-attaches the trial, which waits
  ``HEADWAY_REATTACH_SECONDS``, 30 s by default, for it).

Each time the trial completes with its first run (0 runs re-queued), no restart charged, every
training step stored once and none missing, and its checkpoints registered.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from e2e_tests.workers.test_distributed_e2e import CORE_API, core_api_config, submit
from e2e_tests.workers.test_leases_netns import STEPS, TIMEOUT
from tests.netns_cluster import NetnsCluster, require_netns

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEASE, MARGIN = 10.0, 8.0  # the cluster's (defaults derived from its 1 s heartbeat)
PAST_A_LEASE = LEASE + MARGIN + 10  # an outage every lease of the cluster outlives


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    require_netns()
    cluster = NetnsCluster(
        tmp_path_factory.mktemp("master-faults"), hosts=("a",), slots=2, web_servers=2
    )
    with cluster:
        cluster.wait_hosts_alive()
        yield cluster


def _through(netns: NetnsCluster, fault) -> None:
    """Run a trial, call ``fault()`` after its 4th step, check it cost the trial nothing."""
    api = netns.api
    config = core_api_config(2, sleep=1.0)  # max_restarts: 0: a charged restart is an ERROR
    config["checkpoint_storage"] = netns.s3_storage(prefix=f"faults-{uuid.uuid4().hex[:8]}")
    trial = submit(api, CORE_API, config)
    api.wait_trial(trial["id"], lambda t: t["steps_completed"] >= 4, "training", TIMEOUT)
    fault()
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-60:]
    assert done["restarts"] == 0
    assert done["run_id"] == 1  # never re-queued
    steps, _ = api.series(trial["id"], "training", "loss")
    assert steps == STEPS  # none duplicated, none missing
    assert done["latest_checkpoint"], done


def test_every_web_server_stopped_for_3_minutes_costs_the_trial_nothing(netns):
    def fault() -> None:
        netns.stop_web()
        time.sleep(180)
        netns.start_web()

    _through(netns, fault)


def test_one_of_two_web_servers_killed_costs_the_trial_nothing(netns):
    killed = netns.web_ports[0]
    _through(netns, lambda: netns.kill_web(killed))
    netns.start_web([killed])  # for the module's other tests


def test_a_master_worker_restart_costs_the_trial_nothing(netns):
    def fault() -> None:
        netns.stop_master_worker()
        time.sleep(PAST_A_LEASE)
        netns.start_master_worker()

    _through(netns, fault)


def test_a_postgresql_restart_costs_the_trial_nothing(netns):
    _through(netns, lambda: netns.restart_postgres(down=PAST_A_LEASE))


def test_a_redis_restart_costs_the_trial_nothing(netns):
    _through(netns, lambda: netns.restart_redis(down=PAST_A_LEASE))


def test_a_host_agent_killed_and_back_within_10_s_re_attaches_the_trial(netns):
    def fault() -> None:
        netns.kill_worker("a", signal.SIGKILL)  # the agent only: trials run in their own sessions
        time.sleep(5)
        netns.start_worker("a")

    _through(netns, fault)
    assert "re-attaching 1 run(s)" in netns.hosts["a"].log.read_text()
