"""Trials over two real hosts: network namespaces on a bridge, nothing shared but the network.

The cluster (tests/netns_cluster.py, one per module): a master (PostgreSQL, Redis, moto S3,
gunicorn on the bridge address) and hosts ``a`` and ``b`` (2 CPU slots each) whose workers
run in their own namespaces, whose host names resolve to loopback (as on Debian) and that are
given no ``HEADWAY_HOST_ADDRESS``: each derives it from its route to the master.
Host ``b`` also has a folder of its own (a tmpfs) where the others see the ``split`` storage.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from e2e_tests.workers.test_distributed_e2e import (
    CORE_API,
    check_core_api_resume,
    core_api_config,
    pause_then_activate,
    submit,
)
from tests.netns_cluster import NetnsCluster, in_subnet, require_netns

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT = 600  # seconds per wait: two hosts of torch processes on a small shared machine

# Each host's part of a run prints where it runs and what it advertises (before its ranks).
HOOK = """\
echo "[host-check] host=$(hostname) resolves=$(getent hosts "$(hostname)" | cut -d' ' -f1) \
address=$HEADWAY_HOST_ADDRESS gloo=$GLOO_SOCKET_IFNAME nccl=$NCCL_SOCKET_IFNAME \
chief=$HEADWAY_CHIEF_IP node=$HEADWAY_NODE_RANK"
"""


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    require_netns()
    base = tmp_path_factory.mktemp("netns")
    split = base / "split"
    cluster = NetnsCluster(
        base,
        hosts=("a", "b"),
        slots=2,
        private_dirs={"b": [str(split)]},
        shared_fs={"split": str(split)},
    )
    with cluster:
        cluster.wait_hosts_alive()
        yield cluster


def hooked_example(root: Path) -> Path:
    """The Core API example plus a startup hook reporting each host's view, copied into
    ``root``."""
    target = root / "core_api_distributed"
    shutil.copytree(CORE_API, target)
    (target / "startup-hook.sh").write_text(HOOK)
    return target


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return hooked_example(tmp_path_factory.mktemp("model"))


def host_checks(lines: list[str]) -> list[dict[str, str]]:
    """The startup hook's reports, as ``{key: value}``."""
    found = []
    for line in lines:
        if line.startswith("[host-check] "):
            found.append(dict(item.split("=", 1) for item in line.split()[1:]))
    return found


def placement(netns: NetnsCluster, trial_id: int, run_id: int) -> tuple[str, list[tuple]]:
    """The run's chief host and its shares' ``(host, rendezvous)``, from the master's database
    (a share's host is ``""`` once it is gone: a Slurm job's hosts go when the job is cleaned)."""
    chief = netns.psql(
        "SELECT h.name FROM registry_trialrun r JOIN registry_workerhost h ON h.id = r.host_id"
        f" WHERE r.trial_id = {int(trial_id)} AND r.run_id = {int(run_id)}"
    ).strip()
    shares = netns.psql(
        "SELECT h.name, s.rendezvous FROM registry_runshare s"
        " JOIN registry_trialrun r ON r.id = s.run_id"
        " LEFT JOIN registry_workerhost h ON h.id = s.host_id"
        f" WHERE r.trial_id = {int(trial_id)} AND r.run_id = {int(run_id)} ORDER BY s.node_rank"
    )
    return chief, [tuple(row.split("|")) for row in shares.splitlines() if row]


def test_four_slots_over_two_hosts_meet_on_routed_addresses_and_resume_after_pause(
    netns, model_dir
):
    api = netns.api
    config = core_api_config(4, sleep=0.5)
    config["checkpoint_storage"] = netns.s3_storage(prefix=f"mh-{uuid.uuid4().hex[:8]}")
    trial = submit(api, model_dir, config)
    paused_steps = pause_then_activate(api, trial["id"], after_steps=8)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    assert done["state"] == "COMPLETED", api.logs(trial["id"])[-60:]
    assert done["run_id"] == 2 and done["restarts"] == 0
    addresses = {name: host.address for name, host in netns.hosts.items()}
    for run_id in (1, 2):
        chief, shares = placement(netns, trial["id"], run_id)
        ((other, rendezvous),) = shares
        assert {chief, other} == {"a", "b"}
        # The chief published its routed address, not loopback nor the host name's answer.
        assert rendezvous.rpartition(":")[0] == addresses[chief]
    checks = host_checks(api.logs(trial["id"]))
    assert len(checks) == 4  # two hosts, two runs
    for check in checks:
        host = check["host"].rpartition("-")[2]
        assert check["resolves"].startswith("127.")  # the Debian default is in place
        assert check["address"] == addresses[host] and in_subnet(check["address"], netns)
        assert check["gloo"] == check["nccl"] == "eth0"
        assert check["chief"] in addresses.values()
    # Every rank of both runs took part (world size 4) and each step is stored once.
    check_core_api_resume(api, trial, 4, paused_steps)


def test_a_shared_fs_folder_one_host_does_not_share_is_refused_before_training(netns, model_dir):
    api = netns.api
    config = core_api_config(4, sleep=0.5)
    config["checkpoint_storage"] = netns.shared_storage("split")
    config["max_restarts"] = 0
    trial = submit(api, model_dir, config)
    done = api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the end", timeout=TIMEOUT
    )
    lines = api.logs(trial["id"])
    assert done["state"] == "ERROR", lines[-40:]
    chief, ((other, _),) = placement(netns, trial["id"], 1)
    refusal = [line for line in lines if "is not the same file system" in line]
    assert refusal == [
        f"[headway] checkpoint_storage shared_fs {netns.shared_fs['split']} is not the same "
        f"file system on hosts {chief} and {other}: host {other} cannot read the marker that "
        f"host {chief} wrote in it. Mount one shared folder at that path on every host (and "
        "on the master), or use s3 storage."
    ]
    # Refused before any rank trained: no step, no metric, no checkpoint.
    assert done["steps_completed"] == 0
    assert not [line for line in lines if '"epoch"' in line]
    assert api.get(f"trials/{trial['id']}/checkpoints/")["results"] == []
    # The chief removed its marker when its part ended (what the master's side sees of it).
    markers = Path(netns.shared_fs["split"]) / ".headway-hosts"
    assert not markers.exists() or not list(markers.iterdir())
