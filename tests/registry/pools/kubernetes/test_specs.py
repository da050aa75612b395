"""The Kubernetes pool design's objects, checked by machine against Kubernetes' schema (the
official client's models; the PodGroup CRD's schema): no control plane runs here."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from registry.pools.kubernetes._names import scale_quantity
from registry.pools.kubernetes._settings import KubernetesPoolSettings
from registry.pools.kubernetes.specs import (
    KUEUE_QUEUE_LABEL,
    POD_GROUP_LABEL,
    RUN_LABEL,
    RunSpecInput,
    headless_service,
    host_keys_secret,
    indexed_job,
    job_name,
    pod_group,
    run_objects,
)
from tests.registry.pools.kubernetes.schema import SchemaError, validate, validate_core

KEYS = ["hk-node0-secret", "hk-node1-secret", "hk-node2-secret", "hk-node3-secret"]

KUEUE_POOL = {"namespace": "ml-training", "image": "registry.example/trial:1", "queue_name": "a100"}
FULL_POOL = {
    **KUEUE_POOL,
    "slots_per_node": 8,
    "cpu_per_slot": "6",
    "memory_per_slot": "80Gi",
    "shm_size": "32Gi",
    "service_account": "headway-trial",
    "priority_class_name": "training",
    "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "value": "true", "effect": "NoExecute", "toleration_seconds": 30},
    ],
    "image_pull_secrets": ["registry-creds"],
    "storage_secret": "s3-checkpoints",
    "shared_fs_claim": "checkpoints",
    "shared_fs_mount_path": "/mnt/checkpoints",
    "active_deadline_seconds": 86400,
    "master_url": "http://headway.ml-training.svc:8000",
}
COSCHEDULING_POOL = {**FULL_POOL, "gang": "coscheduling", "queue_name": None}


def make_spec(pool: dict | None = None, *, nodes: int = 2, slots: int = 8) -> RunSpecInput:
    settings = KubernetesPoolSettings(**(pool if pool is not None else FULL_POOL))
    return RunSpecInput(
        run_pk=42,
        trial_id=7,
        run_id=3,
        queue="default",
        pool="k8s-a100",
        nodes=nodes,
        slots_per_node=slots,
        host_names=tuple(f"k8s-r42-n{i}" for i in range(nodes)),
        master_url="http://master:8000",
        settings=settings,
    )


def container(job: dict) -> dict:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


@pytest.mark.parametrize(
    "pool",
    [KUEUE_POOL, FULL_POOL, COSCHEDULING_POOL, {**KUEUE_POOL, "gpus_per_slot": 0}],
    ids=["kueue-minimal", "kueue-full", "coscheduling-full", "cpu-only"],
)
@pytest.mark.parametrize("owner", [None, "0b1c7a52-6a5f-4d7e-9a43-3f8f1d0c2e11"])
def test_every_object_matches_kubernetes_schema(pool, owner):
    nodes = 4
    spec = make_spec(pool, nodes=nodes, slots=4)
    objects = run_objects(spec, KEYS[:nodes], owner)
    kinds = [obj["kind"] for obj in objects]
    expected = ["Job", "Secret", "Service"]
    assert kinds == ([*expected, "PodGroup"] if pool is COSCHEDULING_POOL else expected)
    for obj in objects:
        validate(obj)  # raises on any field the schema does not know, or a bad value
    if owner is not None:
        for obj in objects[1:]:
            (ref,) = obj["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"]) == ("Job", job_name(spec), owner)


def test_the_validator_catches_misspelt_and_missing_fields_and_bad_enums():
    job = indexed_job(make_spec())
    misspelt = copy.deepcopy(job)
    misspelt["spec"]["completionMod"] = misspelt["spec"].pop("completionMode")
    with pytest.raises(SchemaError, match=r"Job\.spec\.completionMod: dropped"):
        validate_core(misspelt)
    misplaced = copy.deepcopy(job)
    misplaced["spec"]["template"]["spec"]["nodeSelectors"] = {"a": "b"}
    with pytest.raises(SchemaError, match=r"template\.spec\.nodeSelectors: dropped"):
        validate_core(misplaced)
    bad_enum = copy.deepcopy(job)
    bad_enum["spec"]["completionMode"] = "indexed"
    with pytest.raises(SchemaError, match=r"completionMode: 'indexed' is not one of"):
        validate_core(bad_enum)
    nameless = copy.deepcopy(job)
    del container(nameless)["name"]
    with pytest.raises(ValueError, match="`name`, must not be `None`"):
        validate_core(nameless)
    group = pod_group(make_spec(COSCHEDULING_POOL))
    group["spec"]["minMembers"] = 2
    with pytest.raises(ValidationError, match="minMembers"):
        validate(group)
    group = pod_group(make_spec(COSCHEDULING_POOL))
    group["spec"]["minResources"]["memory"] = "lots"
    with pytest.raises(ValidationError, match="minResources"):
        validate(group)


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_the_gang_is_the_run_s_nodes(nodes):
    kueue = indexed_job(make_spec(nodes=nodes))
    assert kueue["spec"]["completionMode"] == "Indexed"
    assert kueue["spec"]["completions"] == kueue["spec"]["parallelism"] == nodes
    assert kueue["spec"]["suspend"] is True  # Kueue admits (unsuspends) the whole Job at once
    assert kueue["spec"]["backoffLimit"] == 0  # Headway re-queues; the Job never retries
    assert kueue["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "a100"
    assert "schedulerName" not in kueue["spec"]["template"]["spec"]

    spec = make_spec(COSCHEDULING_POOL, nodes=nodes)
    job, _, service, group = run_objects(spec, KEYS[:nodes])
    assert group["spec"]["minMember"] == job["spec"]["parallelism"] == nodes
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"][POD_GROUP_LABEL] == group["metadata"]["name"]
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert KUEUE_QUEUE_LABEL not in job["metadata"]["labels"]
    # The group's minimum is the whole gang's: 8 GPUs, 48 CPUs, 640Gi per pod of 8 slots.
    assert group["spec"]["minResources"] == {
        "nvidia.com/gpu": str(8 * nodes),
        "cpu": str(48 * nodes),
        "memory": f"{640 * nodes}Gi",
    }
    # The headless Service selects exactly the run's pods and names them <job>-<rank>.<job>.
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {RUN_LABEL: "42"}
    assert pod["metadata"]["labels"][RUN_LABEL] == "42"
    assert pod["spec"]["subdomain"] == service["metadata"]["name"] == job["metadata"]["name"]


def test_gpu_slots_request_gpus_and_cpu_slots_none():
    gpu = container(indexed_job(make_spec(slots=8)))["resources"]
    assert gpu["limits"] == gpu["requests"]
    assert gpu["limits"] == {"nvidia.com/gpu": "8", "cpu": "48", "memory": "640Gi"}

    two = container(indexed_job(make_spec({**FULL_POOL, "gpus_per_slot": 2}, slots=4)))
    assert two["resources"]["limits"]["nvidia.com/gpu"] == "8"

    amd = container(indexed_job(make_spec({**KUEUE_POOL, "gpu_resource": "amd.com/gpu"}, slots=2)))
    assert amd["resources"]["limits"] == {"amd.com/gpu": "2"}

    cpu = container(
        indexed_job(make_spec({**KUEUE_POOL, "gpus_per_slot": 0, "cpu_per_slot": "500m"}, slots=4))
    )
    assert cpu["resources"] == {"requests": {"cpu": "2000m"}, "limits": {"cpu": "2000m"}}
    bare = container(indexed_job(make_spec({**KUEUE_POOL, "gpus_per_slot": 0}, slots=4)))
    assert "resources" not in bare


def test_host_keys_come_from_the_secret_only():
    nodes = 4
    spec = make_spec(nodes=nodes)
    job, secret, service = run_objects(spec, KEYS)
    assert secret["stringData"] == {"host-keys": ",".join(KEYS)}
    assert secret["immutable"] is True
    for obj in (job, service):
        text = json.dumps(obj)
        assert not any(key in text for key in KEYS), f"a host key leaked into the {obj['kind']}"
    env = {item["name"]: item for item in container(job)["env"]}
    assert env["HEADWAY_NODE_HOST_KEYS"] == {
        "name": "HEADWAY_NODE_HOST_KEYS",
        "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "host-keys"}},
    }
    assert env["HEADWAY_NODE_HOSTS"]["value"] == ",".join(spec.host_names)
    # The pods never call the Kubernetes API: no service account token in them.
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    with pytest.raises(ValueError, match="keys: need 4 non-empty host keys"):
        host_keys_secret(spec, KEYS[:3])
    with pytest.raises(ValueError, match="keys: need 4"):
        host_keys_secret(spec, ["a,b", *KEYS[1:]])


def test_excluded_nodes_become_a_node_affinity_that_validates():
    settings = KubernetesPoolSettings(**FULL_POOL)
    spec = RunSpecInput(
        run_pk=42,
        trial_id=7,
        run_id=3,
        queue="default",
        pool="k8s-a100",
        nodes=1,
        slots_per_node=8,
        host_names=("k8s-r42-n0",),
        master_url="http://master:8000",
        settings=settings,
        excluded_nodes=("gpu-node-07", "gpu-node-12"),
    )
    job = indexed_job(spec)
    validate(job)
    affinity = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {
            "key": "kubernetes.io/hostname",
            "operator": "NotIn",
            "values": ["gpu-node-07", "gpu-node-12"],
        }
    ]
    assert "affinity" not in indexed_job(make_spec())["spec"]["template"]["spec"]
    with pytest.raises(ValueError, match=r"node name \(excluded_nodes\)"):
        RunSpecInput(**{**vars(spec), "excluded_nodes": ("Bad Node",)})


def test_pool_settings_reach_the_pod():
    job = indexed_job(make_spec(FULL_POOL))
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "headway-trial"
    assert pod["priorityClassName"] == "training"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "spot",
            "operator": "Equal",
            "value": "true",
            "effect": "NoExecute",
            "tolerationSeconds": 30,
        },
    ]
    assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert pod["restartPolicy"] == "Never"
    assert pod["terminationGracePeriodSeconds"] == 120
    assert job["spec"]["activeDeadlineSeconds"] == 86400
    node = container(job)
    assert node["envFrom"] == [{"secretRef": {"name": "s3-checkpoints"}}]
    assert {"name": "shared-fs", "mountPath": "/mnt/checkpoints"} in node["volumeMounts"]
    assert {"name": "shared-fs", "persistentVolumeClaim": {"claimName": "checkpoints"}} in pod[
        "volumes"
    ]
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod["volumes"]
    env = {item["name"]: item.get("value") for item in node["env"]}
    assert env["HEADWAY_MASTER"] == "http://headway.ml-training.svc:8000"  # the pool's wins
    assert env["HEADWAY_TRIAL_ID"] == "7" and env["HEADWAY_RUN_ID"] == "3"
    # The disruption rule comes first: reconcile reads its index from the Failed condition.
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0]["onPodConditions"] == [{"type": "DisruptionTarget", "status": "True"}]
    assert headless_service(make_spec())["metadata"]["namespace"] == "ml-training"


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"slots_per_node": -1}, "slots_per_node", "greater than or equal to 1"),
        ({"namespace": "ML_Training"}, "namespace", "RFC 1123 label"),
        ({"namespace": "a" * 64}, "namespace", "at most 63"),
        ({"queue_name": None}, "queue_name", "required with gang: kueue"),
        ({"gang": "coscheduling"}, "queue_name", "only with gang: kueue"),
        ({"gang": "volcano"}, "gang", "'kueue' or 'coscheduling'"),
        ({"service_account": "Bad Name"}, "service_account", "RFC 1123 subdomain"),
        ({"image_pull_secrets": ["ok", "-bad"]}, "image_pull_secrets", "Secret name"),
        ({"node_selector": {"gpu": "a100!"}}, "node_selector", "label value"),
        ({"gpu_resource": "nvidia.com/"}, "gpu_resource", "resource name"),
        ({"gpus_per_slot": -1}, "gpus_per_slot", "greater than or equal to 0"),
        ({"memory_per_slot": "80GB"}, "memory_per_slot", "not a Kubernetes quantity"),
        (
            {"tolerations": [{"operator": "Exists", "value": "x"}]},
            "tolerations.0",
            "value: must be unset",
        ),
        ({"tolerations": [{"key": "k", "effect": "NoRun"}]}, "tolerations.0.effect", "NoExecute"),
        ({"shared_fs_claim": "ckpt"}, "shared_fs_claim", "set both or neither"),
        ({"image": "has space"}, "image", "pattern"),
        ({"privileged": True}, "privileged", "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_name_their_field(change, field, says):
    with pytest.raises(ValidationError) as caught:
        KubernetesPoolSettings(**{**KUEUE_POOL, **change})
    text = str(caught.value)
    assert field in text and says in text, text


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"slots": -1}, "slots_per_node: must be at least 1, got -1"),
        ({"slots": 0}, "slots_per_node: must be at least 1"),
        ({"nodes": 0}, "nodes: must be at least 1"),
        ({"slots": 16}, "slots_per_node: 16 is over the pool's slots_per_node 8"),
    ],
)
def test_bad_run_input_names_its_field(kwargs, says):
    with pytest.raises(ValueError, match=says):
        make_spec(**kwargs)


def test_names_must_fit_kubernetes():
    with pytest.raises(ValueError, match="host_names: 1 names for 2 node"):
        RunSpecInput(
            run_pk=1,
            trial_id=1,
            run_id=1,
            queue="q",
            pool="p",
            nodes=2,
            slots_per_node=1,
            host_names=("only-one",),
            master_url="http://m",
            settings=KubernetesPoolSettings(**KUEUE_POOL),
        )
    # name_prefix "-r<run>-<rank>" must stay a 63-character host name.
    long = KubernetesPoolSettings(**{**KUEUE_POOL, "name_prefix": "x" * 30})
    spec = make_spec({**KUEUE_POOL, "name_prefix": "x" * 30})
    assert job_name(spec) == "x" * 30 + "-r42"
    with pytest.raises(ValueError, match=r"name_prefix"):
        RunSpecInput(
            run_pk=10**30,
            trial_id=1,
            run_id=1,
            queue="q",
            pool="p",
            nodes=1,
            slots_per_node=1,
            host_names=("h",),
            master_url="http://m",
            settings=long,
        )


@pytest.mark.parametrize(
    ("value", "times", "expected"),
    [
        ("500m", 4, "2000m"),
        ("6", 8, "48"),
        ("80Gi", 2, "160Gi"),
        ("1.5Gi", 2, "3Gi"),
        ("0.25", 3, "0.75"),
    ],
)
def test_quantities_scale_in_their_own_suffix(value, times, expected):
    assert scale_quantity(value, times) == expected


def test_the_package_imports_nothing_and_offers_no_pool_type():
    # A fresh interpreter: what importing the package alone brings (pool discovery may import
    # every subpackage of registry.pools while Django starts).
    code = (
        "import sys, django; django.setup(); import registry.pools.kubernetes as package; "
        "print(json.dumps({'public': [n for n in vars(package) if not n.startswith('_')], "
        "'loaded': sorted(m for m in sys.modules if m.startswith(('kubernetes', "
        "'registry.pools.kubernetes.')))}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # No provider object, no marker, no submodule or client loaded: a design, not a pool type.
    assert found == {"public": [], "loaded": []}, found
