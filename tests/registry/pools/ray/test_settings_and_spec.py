"""A ray pool's settings (registry.pools.ray.settings), checked when the pools file is read,
and the Ray job a run becomes (registry.pools.ray._submit.job_spec)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from registry.pools import load_resource_pools
from registry.pools.ray._client import group_name, submission_id
from registry.pools.ray._submit import job_spec
from registry.pools.ray.settings import RayPoolSettings, ray_settings

ADDRESS = "address: 'http://ray-head:8265'"


def _load(tmp_path, entry: str):
    path = tmp_path / "pools.yaml"
    path.write_text(f"- {{name: r, type: ray, {entry}}}\n")
    return load_resource_pools(path)


def test_a_ray_pool_carries_its_settings_with_defaults(tmp_path):
    pool = _load(tmp_path, f"{ADDRESS}, strategy: STRICT_SPREAD").pools["r"]
    options = ray_settings(pool)
    assert pool.hosts_per_run
    assert options.strategy == "STRICT_SPREAD"
    assert options.resources_per_slot == {"CPU": 1}
    assert options.stop_after_exit_seconds == 60


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("strategy: PACK", "address"),  # required
        ("address: 'ray-head:8265'", "address"),
        (f"{ADDRESS}, strategy: SPREAD", "strategy"),
        (f"{ADDRESS}, resources_per_slot: {{CPU: 0}}", "resources_per_slot"),
        (f"{ADDRESS}, resources_per_slot: {{'bad name': 1}}", "resources_per_slot"),
        (f"{ADDRESS}, resources_per_slot: {{}}", "resources_per_slot"),
        (f"{ADDRESS}, runtime_env: {{py_executable: /bin/x}}", "runtime_env"),
        (f"{ADDRESS}, runtime_env: {{env_vars: {{HEADWAY_MASTER: x}}}}", "runtime_env"),
        (f"{ADDRESS}, runtime_env: {{env_vars: {{A: 1}}}}", "runtime_env"),
        (f"{ADDRESS}, python: bin/python", "python"),
        (f"{ADDRESS}, master_url: 'ftp://m'", "master_url"),
        (f"{ADDRESS}, stop_after_exit_seconds: 0", "stop_after_exit_seconds"),
        (f"{ADDRESS}, partition: debug", "partition"),  # another type's setting
    ],
)
def test_a_bad_value_is_refused_naming_the_entry_and_field(tmp_path, entry, field):
    with pytest.raises(ImproperlyConfigured) as caught:
        _load(tmp_path, entry)
    assert f"entry 1 (name 'r'), field {field}" in str(caught.value)


def test_bundles_are_one_per_slot_and_a_node_holds_whole_slots():
    options = RayPoolSettings(address="http://h:8265", resources_per_slot={"CPU": 2, "GPU": 1})
    assert options.bundles(3) == [{"CPU": 2.0, "GPU": 1.0}] * 3
    assert options.bundles(0) == [{"CPU": 2.0, "GPU": 1.0}]  # a trial takes one bundle at least
    assert options.slots_of({"CPU": 8.0, "GPU": 2.0, "memory": 1e9}) == 2  # GPUs bound it
    assert options.slots_of({"CPU": 8.0}) == 0  # no GPU: no slot


def test_a_run_becomes_a_job_whose_driver_places_its_bundles():
    options = RayPoolSettings(
        address="http://h:8265",
        strategy="STRICT_SPREAD",
        runtime_env={"env_vars": {"PYTHONPATH": "/opt/hw"}, "working_dir": "/srv/code"},
    )
    submission = submission_id("ns", 42)
    spec = job_spec(
        options,
        submission=submission,
        python="/opt/hw/bin/python",
        environment={"HEADWAY_RAY_HOSTS": "ray-r42-b0,ray-r42-b1", "HEADWAY_TRIAL_ID": "7"},
        slots=2,
    )
    assert spec.submission_id == "headway-ns-r42" == submission_id("ns", 42)  # same on a retry
    assert spec.entrypoint == "/opt/hw/bin/python -m workers.ray_node"
    assert spec.runtime_env["working_dir"] == "/srv/code"
    env = spec.runtime_env["env_vars"]
    assert env["PYTHONPATH"] == "/opt/hw"  # the admin's variables, and Headway's
    assert env["HEADWAY_RAY_HOSTS"] == "ray-r42-b0,ray-r42-b1"
    assert json.loads(env["HEADWAY_RAY_BUNDLES"]) == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert env["HEADWAY_RAY_STRATEGY"] == "STRICT_SPREAD"
    assert env["HEADWAY_RAY_PLACEMENT_GROUP"] == group_name(submission)
    assert options.runtime_env["env_vars"] == {"PYTHONPATH": "/opt/hw"}  # not changed in place
