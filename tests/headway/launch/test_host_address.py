"""The address a worker host advertises and the interface its ranks bind.

Unit level, on this machine's real interfaces (``psutil``) and routes; the multi-host test with
real namespaced hosts is e2e_tests/workers/test_multihost_netns.py.
"""

from __future__ import annotations

import pytest

from headway.launch import torch_distributed as launch
from headway.launch._network import (
    HostAddressError,
    advertised_address,
    interface_of,
    local_addresses,
    route_source_address,
    socket_ifname_environment,
)


def test_loopback_is_owned_by_the_loopback_interface():
    assert "127.0.0.1" in local_addresses()
    assert interface_of("127.0.0.1") == local_addresses()["127.0.0.1"]
    assert interface_of("192.0.2.254") is None or "192.0.2.254" in local_addresses()


def test_the_route_to_a_server_gives_the_source_address_of_this_host():
    assert route_source_address("127.0.0.1") == "127.0.0.1"
    assert route_source_address("no-such-host.invalid") is None
    # Derived from the first server URL with a route; the next ones are fallbacks.
    address = advertised_address("", ["http://no-such-host.invalid:8000", "redis://127.0.0.1/0"])
    assert address == "127.0.0.1"


def test_an_address_that_is_not_this_host_s_is_refused_naming_the_variable():
    with pytest.raises(HostAddressError, match=r"HEADWAY_HOST_ADDRESS=203\.0\.113\.9 is not an"):
        advertised_address("203.0.113.9", ["http://127.0.0.1:8000"])
    with pytest.raises(HostAddressError, match="HEADWAY_HOST_ADDRESS='gpu-a' is not an IP"):
        advertised_address("gpu-a", [])
    with pytest.raises(HostAddressError, match="HEADWAY_HOST_ADDRESS is unset and no route"):
        advertised_address("", ["http://no-such-host.invalid:8000"])
    assert advertised_address("127.0.0.1", []) == "127.0.0.1"


def test_ranks_bind_the_interface_of_the_address_unless_the_user_chose_one():
    lo = interface_of("127.0.0.1")
    assert socket_ifname_environment("127.0.0.1", {}) == {
        "GLOO_SOCKET_IFNAME": lo,
        "NCCL_SOCKET_IFNAME": lo,
    }
    # The experiment's environment_variables or the worker's own environment win.
    assert socket_ifname_environment("127.0.0.1", {"GLOO_SOCKET_IFNAME": "eth9"}, {}) == {
        "NCCL_SOCKET_IFNAME": lo
    }
    assert socket_ifname_environment("127.0.0.1", {}, {"NCCL_SOCKET_IFNAME": "ib0"}) == {
        "GLOO_SOCKET_IFNAME": lo
    }
    assert socket_ifname_environment("203.0.113.9", {}) == {}


def test_torchrun_never_looks_the_host_name_up():
    one = launch.plan_from_env(
        {"HEADWAY_SLOT_IDS": "cpu0,cpu1", "HEADWAY_HOST_ADDRESS": "10.0.0.5"}
    )
    cmd = launch.torchrun_command(one, ["python", "train.py"])
    assert cmd[cmd.index("--local-addr") + 1] == "127.0.0.1"  # one host: loopback
    several = launch.plan_from_env(
        {
            "HEADWAY_SLOT_IDS": "cpu0,cpu1",
            "HEADWAY_NUM_NODES": "2",
            "HEADWAY_NODE_RANK": "1",
            "HEADWAY_CHIEF_IP": "10.0.0.4",
            "HEADWAY_RDZV_PORT": "29500",
            "HEADWAY_HOST_ADDRESS": "10.0.0.5",
        }
    )
    cmd = launch.torchrun_command(several, ["python", "train.py"], ["--local-addr", "10.9.9.9"])
    assert cmd[cmd.index("--local-addr") + 1] == "10.0.0.5"
    assert cmd[cmd.index("--master-addr") + 1] == "10.0.0.4"
    # The user's override comes later on the line: torchrun keeps the last value.
    assert cmd.index("10.9.9.9") > cmd.index("10.0.0.5")


@pytest.mark.django_db
def _one_slot_spec():
    from headway.client import wire

    return wire.LaunchSpec(
        experiment_id=1, trial_id=2, run_id=1, hparams={}, trial_seed=0,
        experiment_config={
            "entrypoint": "python train.py", "searcher": {"name": "single", "metric": "loss"}
        },
        latest_checkpoint=None,
        latest_checkpoint_steps=None, searcher_length=None, slots=1, devices=["cpu0"],
        gpu=False, run_slots=1, model_definition_bytes=0,
    )  # fmt: skip


def test_a_one_host_run_starts_without_an_address_and_a_wrong_one_fails_the_worker(
    tmp_path, monkeypatch
):
    from workers import __main__ as agent_main
    from workers import address, launch
    from workers.config import settings

    spec = _one_slot_spec()
    monkeypatch.setattr(settings, "HEADWAY_HOST_ADDRESS", "")
    monkeypatch.setattr(settings, "HEADWAY_MASTER_URL", "http://no-such-host.invalid:8000")
    monkeypatch.setattr(settings, "BROKER_URL", "redis://no-such-host.invalid:6379/0")
    monkeypatch.setattr(settings, "HEADWAY_HOST_TOKEN", "hwh_test")
    address._advertised.cache_clear()
    env = launch.environment(spec, "run-token", tmp_path / "info.json")
    assert "HEADWAY_HOST_ADDRESS" not in env and "GLOO_SOCKET_IFNAME" not in env
    monkeypatch.setattr(settings, "HEADWAY_MASTER_URL", "http://127.0.0.1:8000")
    env = launch.environment(spec, "run-token", tmp_path / "info.json")
    assert env["HEADWAY_HOST_ADDRESS"] == "127.0.0.1"
    assert env["GLOO_SOCKET_IFNAME"] == interface_of("127.0.0.1")
    # A HEADWAY_HOST_ADDRESS that is not this host's stops the host agent at start.
    monkeypatch.setattr(settings, "HEADWAY_HOST_ADDRESS", "203.0.113.9")
    with pytest.raises(SystemExit, match=r"HEADWAY_HOST_ADDRESS=203\.0\.113\.9 is not an address"):
        agent_main.main()
