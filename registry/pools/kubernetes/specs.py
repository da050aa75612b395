"""The Kubernetes objects one run of a kubernetes pool would become (a design: nothing submits
them yet; docs/design/kubernetes-pools.md).

Pure functions from a ``RunSpecInput`` to plain dicts in Kubernetes' JSON form (camelCase, what
``kubectl apply -f`` and the API server take), in the order the pool would create them:

1. the Job (``batch/v1``, ``completionMode: Indexed``, ``parallelism = completions = nodes``),
   always created suspended so the objects it owns exist before any pod starts;
2. the Secret of the run's host keys and the headless Service for the pods' names, both owned
   by the Job (deleted with it);
3. with ``gang: coscheduling``, the PodGroup (``scheduling.x-k8s.io/v1alpha1``) of
   ``minMember = nodes``, also owned by the Job; then the Job is unsuspended. With ``gang:
   kueue`` the Job carries ``kueue.x-k8s.io/queue-name`` and Kueue unsuspends it on admission.

Each pod runs the pool's node entry point, one per node as a batch job's node process does: the
rank is the pod's completion index (``JOB_COMPLETION_INDEX``, set by the Job controller), the
host names are plain variables and the host keys come only from the Secret. The tests check
every object against the official Kubernetes client's models and the PodGroup against its CRD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.pools.kubernetes._names import check_dns_label, check_dns_subdomain, scale_quantity
from registry.pools.kubernetes._settings import COSCHEDULING, KUEUE, KubernetesPoolSettings

# The node entry point the pods run: a node process with its rank from JOB_COMPLETION_INDEX
# and its hosts and keys from HEADWAY_NODE_HOSTS / HEADWAY_NODE_HOST_KEYS (to be written when
# the pool is wired; the design's "How hosts appear").
NODE_MODULE = "workers.kubernetes_node"
CONTAINER = "node"
HOST_KEYS_KEY = "host-keys"
# Labels: ours under headway/, Kueue's and the coscheduling plugin's as they spell them.
RUN_LABEL = "headway/run"
TRIAL_LABEL = "headway/trial"
MANAGED_BY = "app.kubernetes.io/managed-by"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The Job's podFailurePolicy rule that marks a disruption (eviction, preemption, node loss):
# its index appears in the Job's Failed condition message, which reconcile reads.
DISRUPTION_RULE = 0

JSON = dict[str, Any]


@dataclass(frozen=True)
class RunSpecInput:
    """What the objects of one run are built from.

    Attributes:
        run_pk (int): the run's primary key (names and labels: unique in the registry).
        trial_id (int): the run's trial.
        run_id (int): the run's number within its trial.
        queue (str): the Headway namespace (queue) of the run (``HEADWAY_QUEUE``).
        pool (str): the resource pool's name (``HEADWAY_RESOURCE_POOL``).
        nodes (int): pods of the Job, one per node's share (>= 1).
        slots_per_node (int): slots of each pod (>= 1); at most the pool's ``slots_per_node``.
        host_names (tuple[str, ...]): the host the master made for each pod, by rank.
        master_url (str): the master's URL as the pods reach it (the pool's ``master_url``
            wins when set).
        settings (KubernetesPoolSettings): the pool's settings.
        excluded_nodes (tuple[str, ...]): Kubernetes nodes the pods must avoid (the pool's
            nodes Headway excluded after runs failed to start there, as a batch pool excludes them).

    Raises (on construction):
        ValueError: naming the field: nodes or slots below 1, slots over the pool's
            ``slots_per_node``, not one host name per node, or names too long for Kubernetes.
    """

    run_pk: int
    trial_id: int
    run_id: int
    queue: str
    pool: str
    nodes: int
    slots_per_node: int
    host_names: tuple[str, ...]
    master_url: str
    settings: KubernetesPoolSettings
    excluded_nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes: must be at least 1, got {self.nodes}")
        if self.slots_per_node < 1:
            raise ValueError(f"slots_per_node: must be at least 1, got {self.slots_per_node}")
        limit = self.settings.slots_per_node
        if limit is not None and self.slots_per_node > limit:
            raise ValueError(
                f"slots_per_node: {self.slots_per_node} is over the pool's slots_per_node {limit}"
            )
        if len(self.host_names) != self.nodes:
            raise ValueError(
                f"host_names: {len(self.host_names)} names for {self.nodes} node(s); one per pod"
            )
        if self.run_pk < 1:
            raise ValueError(f"run_pk: must be positive, got {self.run_pk}")
        # Pod host names are "<job>-<index>": an RFC 1123 label, so the Job's name leaves room.
        check_dns_label(f"{job_name(self)}-{self.nodes - 1}", "pod host name (name_prefix)")
        for node in self.excluded_nodes:
            check_dns_subdomain(node, "node name (excluded_nodes)")

    @property
    def slots(self) -> int:
        """The run's slots: ``nodes * slots_per_node``."""
        return self.nodes * self.slots_per_node


def job_name(spec: RunSpecInput) -> str:
    """``<name_prefix>-r<run pk>``: the Job's, the Service's, the PodGroup's name."""
    return f"{spec.settings.name_prefix}-r{spec.run_pk}"


def secret_name(spec: RunSpecInput) -> str:
    """``<job name>-host-keys``: the Secret holding the run's host keys."""
    return f"{job_name(spec)}-host-keys"


def _labels(spec: RunSpecInput) -> dict[str, str]:
    return {
        RUN_LABEL: str(spec.run_pk),
        TRIAL_LABEL: str(spec.trial_id),
        MANAGED_BY: "headway",
    }


def _metadata(spec: RunSpecInput, name: str, owner_uid: str | None) -> JSON:
    meta: JSON = {"name": name, "namespace": spec.settings.namespace, "labels": _labels(spec)}
    if owner_uid is not None:
        # Owned by the Job: deleting it (kill, cancel, the TTL) deletes these with it.
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job_name(spec),
                "uid": owner_uid,
                "controller": False,
                "blockOwnerDeletion": True,
            }
        ]
    return meta


def host_keys_secret(spec: RunSpecInput, keys: list[str], owner_uid: str | None = None) -> JSON:
    """The Secret of the run's host keys: one key ``host-keys``, the keys comma-joined by rank
    (as a batch pool passes its nodes' keys); ``owner_uid``: the Job's, once created.

    Raises:
        ValueError: not one key per node, or a key that is empty or holds a comma.
    """
    if len(keys) != spec.nodes or any(not key or "," in key for key in keys):
        raise ValueError(f"keys: need {spec.nodes} non-empty host keys without commas")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(spec, secret_name(spec), owner_uid),
        "type": "Opaque",
        "immutable": True,
        "stringData": {HOST_KEYS_KEY: ",".join(keys)},
    }


def headless_service(spec: RunSpecInput, owner_uid: str | None = None) -> JSON:
    """The headless Service that gives each pod the DNS name ``<job>-<rank>.<job>``: the pods
    of a gang resolve each other's host names (NCCL's and gloo's bootstrap use them)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, job_name(spec), owner_uid),
        "spec": {
            "clusterIP": "None",
            "selector": {RUN_LABEL: str(spec.run_pk)},
            # The pods have no readiness probe: they resolve from the start.
            "publishNotReadyAddresses": True,
        },
    }


def pod_group(spec: RunSpecInput, owner_uid: str | None = None) -> JSON:
    """The scheduler-plugins PodGroup of the run's pods (``gang: coscheduling``): no pod binds
    until ``minMember`` = all of them can, within ``scheduleTimeoutSeconds``."""
    resources = _pod_resources(spec.settings, spec.slots_per_node)
    return {
        "apiVersion": POD_GROUP_API,
        "kind": "PodGroup",
        "metadata": _metadata(spec, job_name(spec), owner_uid),
        "spec": {
            "minMember": spec.nodes,
            "minResources": {
                name: scale_quantity(value, spec.nodes) for name, value in resources.items()
            },
            "scheduleTimeoutSeconds": spec.settings.schedule_timeout_seconds,
        },
    }


def _pod_resources(settings: KubernetesPoolSettings, slots: int) -> dict[str, str]:
    """A pod's requests (= its limits) for ``slots`` slots."""
    resources: dict[str, str] = {}
    if settings.gpus_per_slot:
        resources[settings.gpu_resource] = str(settings.gpus_per_slot * slots)
    if settings.cpu_per_slot is not None:
        resources["cpu"] = scale_quantity(settings.cpu_per_slot, slots)
    if settings.memory_per_slot is not None:
        resources["memory"] = scale_quantity(settings.memory_per_slot, slots)
    return resources


def _environment(spec: RunSpecInput) -> list[JSON]:
    """The node process's variables: Headway's own (no secret among the plain ones), the host
    keys from the Secret, the pod's address from the downward API."""
    settings = spec.settings
    plain = {
        "HEADWAY_MASTER": settings.master_url or spec.master_url,
        "HEADWAY_QUEUE": spec.queue,
        "HEADWAY_RESOURCE_POOL": spec.pool,
        "HEADWAY_TRIAL_ID": str(spec.trial_id),
        "HEADWAY_RUN_ID": str(spec.run_id),
        "HEADWAY_NODE_HOSTS": ",".join(spec.host_names),
        "HEADWAY_SLOTS": str(spec.slots_per_node),
        "HEADWAY_WORK_DIR": settings.work_dir,
        "HEADWAY_VAR_DIR": settings.work_dir,
    }
    env: list[JSON] = [{"name": name, "value": value} for name, value in plain.items()]
    env.append(
        {
            "name": "HEADWAY_NODE_HOST_KEYS",
            "valueFrom": {"secretKeyRef": {"name": secret_name(spec), "key": HOST_KEYS_KEY}},
        }
    )
    # The gang's rendezvous address of this node: the pod's IP (the chief's is what the others
    # dial, as an agent host's HEADWAY_HOST_ADDRESS).
    env.append(
        {"name": "HEADWAY_HOST_ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    )
    return env


def _volumes(settings: KubernetesPoolSettings) -> tuple[list[JSON], list[JSON]]:
    """``(volumes, the container's mounts)``: the work dir, /dev/shm, the shared_fs claim."""
    volumes: list[JSON] = [{"name": "work", "emptyDir": {}}]
    mounts: list[JSON] = [{"name": "work", "mountPath": settings.work_dir}]
    if settings.shm_size is not None:
        volumes.append(
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}}
        )
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
    if settings.shared_fs_claim is not None:
        volumes.append(
            {"name": "shared-fs", "persistentVolumeClaim": {"claimName": settings.shared_fs_claim}}
        )
        mounts.append({"name": "shared-fs", "mountPath": settings.shared_fs_mount_path})
    return volumes, mounts


def _pod_template(spec: RunSpecInput) -> JSON:
    settings = spec.settings
    volumes, mounts = _volumes(settings)
    resources = _pod_resources(settings, spec.slots_per_node)
    container: JSON = {
        "name": CONTAINER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": [settings.python, "-m", NODE_MODULE],
        "env": _environment(spec),
        "volumeMounts": mounts,
        "workingDir": settings.work_dir,
    }
    if settings.storage_secret is not None:
        container["envFrom"] = [{"secretRef": {"name": settings.storage_secret}}]
    if resources:
        # Extended resources (GPUs) must have limits equal to requests; CPU and memory get the
        # same so the pods are Guaranteed, the last a node evicts under pressure.
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    pod_spec: JSON = {
        "restartPolicy": "Never",  # Headway restarts runs, as new Jobs; never the kubelet
        "subdomain": job_name(spec),  # with the headless Service: <job>-<rank>.<job>
        "automountServiceAccountToken": False,  # the pods never call the Kubernetes API
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "containers": [container],
        "volumes": volumes,
    }
    optional = {
        "serviceAccountName": settings.service_account,
        "schedulerName": settings.pod_scheduler,
        "priorityClassName": settings.priority_class_name,
    }
    pod_spec.update({key: value for key, value in optional.items() if value is not None})
    if settings.node_selector:
        pod_spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        pod_spec["tolerations"] = [t.as_kubernetes() for t in settings.tolerations]
    if spec.excluded_nodes:
        # Headway's own exclusion, not a taint: the nodes stay the cluster's (see the design).
        term = {"key": HOSTNAME_LABEL, "operator": "NotIn", "values": list(spec.excluded_nodes)}
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    labels = _labels(spec)
    if settings.gang == COSCHEDULING:
        labels[POD_GROUP_LABEL] = job_name(spec)
    return {"metadata": {"labels": labels}, "spec": pod_spec}


def indexed_job(spec: RunSpecInput) -> JSON:
    """The run's Job: ``completionMode: Indexed``, one pod per node (``parallelism =
    completions = nodes``), created suspended (see module), never retried by the Job controller
    (``backoffLimit: 0``), with a pod failure policy that tells disruptions from failures."""
    settings = spec.settings
    metadata: JSON = {
        "name": job_name(spec),
        "namespace": settings.namespace,
        "labels": _labels(spec),
        "annotations": {"headway/pool": spec.pool, "headway/queue": spec.queue},
    }
    if settings.gang == KUEUE:
        assert settings.queue_name is not None  # the settings require it with kueue
        metadata["labels"][KUEUE_QUEUE_LABEL] = settings.queue_name
    job_spec: JSON = {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimit": 0,
        "suspend": True,
        "ttlSecondsAfterFinished": settings.keep_finished_seconds,
        "podFailurePolicy": {
            "rules": [
                # DISRUPTION_RULE: evicted, preempted, its node gone: lost, not the trial's fault.
                {
                    "action": "FailJob",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
                # The node process exits 0 once the run's outcome reached the master; anything
                # else is the node process failing (a run lost before start, as in a batch pool).
                {
                    "action": "FailJob",
                    "onExitCodes": {
                        "containerName": CONTAINER,
                        "operator": "NotIn",
                        "values": [0],
                    },
                },
            ]
        },
        "template": _pod_template(spec),
    }
    if settings.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = settings.active_deadline_seconds
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


def run_objects(spec: RunSpecInput, keys: list[str], job_uid: str | None = None) -> list[JSON]:
    """Every object of the run, in creation order (see module): the Job, the Secret, the
    Service and, with coscheduling, the PodGroup; ``job_uid``: the created Job's uid, which
    the others name as their owner (None: no owner reference, for a dry run).

    Raises:
        ValueError: the keys do not fit the run (``host_keys_secret``).
    """
    objects = [
        indexed_job(spec),
        host_keys_secret(spec, keys, job_uid),
        headless_service(spec, job_uid),
    ]
    if spec.settings.gang == COSCHEDULING:
        objects.append(pod_group(spec, job_uid))
    return objects
