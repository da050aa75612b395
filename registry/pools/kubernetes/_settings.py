"""The settings a ``type: kubernetes`` pool entry would take (a design: not read from the pools
file yet; docs/design/kubernetes-pools.md).

As a batch pool's, they are the admin's alone: an experiment config has no pod field, so users
cannot add node selectors, privileges or volumes. Every value is checked as the API server would
check it (``_names``), so a typo would stop the master at start-up instead of failing each Job::

    - name: k8s-a100
      type: kubernetes
      namespace: ml-training          # where the Jobs, Services and Secrets go
      image: registry.example/headway-trial:1.4
      gang: kueue                     # or coscheduling (scheduler-plugins PodGroup)
      queue_name: a100-queue          # the Kueue LocalQueue (gang: kueue)
      slots_per_node: 8               # a trial of 16 slots: 2 pods x 8 GPUs
      gpus_per_slot: 1                # 0: CPU slots
      cpu_per_slot: "6"
      memory_per_slot: 80Gi
      service_account: headway-trial
      node_selector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      image_pull_secrets: [registry-creds]
      storage_secret: s3-checkpoints  # its keys become the pods' variables (AWS_ACCESS_KEY_ID...)
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from registry.pools.kubernetes._names import (
    check_dns_label,
    check_dns_subdomain,
    check_label_value,
    check_qualified_name,
    check_quantity,
)

KUEUE: Literal["kueue"] = "kueue"
COSCHEDULING: Literal["coscheduling"] = "coscheduling"
# The scheduler-plugins' second scheduler as its Helm chart names it.
DEFAULT_COSCHEDULER = "scheduler-plugins-scheduler"


class Toleration(BaseModel):
    """One pod toleration (Kubernetes' ``Toleration``, the fields a pool needs).

    Attributes:
        key (str | None): the taint key; None with ``operator: Exists`` tolerates every taint.
        operator (str): ``Equal`` (key and value match) or ``Exists`` (key matches).
        value (str | None): the taint value (``Equal`` only).
        effect (str | None): ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``; None: all.
        toleration_seconds (int | None): how long a ``NoExecute`` taint is tolerated.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Annotated[int, Field(ge=0)] | None = None

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        return value if value is None else check_qualified_name(value, "taint key")

    @field_validator("value")
    @classmethod
    def _check_value(cls, value: str | None) -> str | None:
        return value if value is None else check_label_value(value, "taint value")

    @model_validator(mode="after")
    def _check_operator(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("value: must be unset with operator: Exists")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("key: required with operator: Equal")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds: only with effect: NoExecute")
        return self

    def as_kubernetes(self) -> dict[str, object]:
        """The toleration in Kubernetes' JSON form (unset fields left out)."""
        fields = {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
            "tolerationSeconds": self.toleration_seconds,
        }
        return {name: value for name, value in fields.items() if value is not None}


class KubernetesPoolSettings(BaseModel):
    """A kubernetes pool's settings (see the module's example).

    Attributes:
        namespace (str): the Kubernetes namespace of the pool's objects (RFC 1123 label).
        image (str): the container image with Headway and the trials' dependencies installed.
        image_pull_policy (str): ``IfNotPresent``, ``Always`` or ``Never``.
        python (str): the Python in the image that runs ``-m <node module>``.
        gang (str): ``kueue`` (the Job carries Kueue's queue label and is created suspended;
            Kueue admits all its pods at once) or ``coscheduling`` (a PodGroup of ``minMember``
            = the pods, scheduled by the scheduler-plugins' scheduler).
        queue_name (str | None): the Kueue LocalQueue in ``namespace``; required with
            ``gang: kueue``, refused otherwise.
        scheduler_name (str | None): the pods' scheduler; None: the cluster's default with
            Kueue, ``scheduler-plugins-scheduler`` with coscheduling.
        schedule_timeout_seconds (int): the PodGroup's wait for all its pods (coscheduling).
        priority_class_name (str | None): the pods' PriorityClass (kube-scheduler's preemption;
            Kueue's workload priority when no WorkloadPriorityClass is set).
        service_account (str | None): the pods' ServiceAccount; None: the namespace's default.
            The pods never call the Kubernetes API, so its token is not mounted.
        node_selector (dict[str, str]): the pods' node selector (label key to value).
        tolerations (list[Toleration]): the pods' tolerations.
        image_pull_secrets (list[str]): Secrets of the image registry's credentials.
        slots_per_node (int | None): slots one pod gives a trial; a trial of more spans
            ``slots_per_trial / slots_per_node`` pods (which must divide). None: one pod.
        gpu_resource (str): the extended resource of one GPU (``nvidia.com/gpu``,
            ``amd.com/gpu``).
        gpus_per_slot (int): GPUs per slot; 0: CPU slots (no GPU requested).
        cpu_per_slot, memory_per_slot (str | None): quantities per slot, requested and
            limited (``6``, ``500m``; ``80Gi``); None: not requested.
        shm_size (str | None): a memory-backed ``/dev/shm`` of this size (NCCL and data
            loader workers need more than the runtime's 64 MiB); None: the runtime's.
        termination_grace_seconds (int): between SIGTERM (eviction, preemption, kill) and
            SIGKILL: the trial's time to checkpoint (a batch pool's ``preempt_grace_seconds``).
        active_deadline_seconds (int | None): the Job's time limit (a batch pool's ``time_limit``).
        keep_finished_seconds (int): ``ttlSecondsAfterFinished``: a finished Job the master
            did not delete (its worker was down) is garbage-collected after this.
        storage_secret (str | None): a Secret whose keys become the pods' variables (S3
            checkpoint storage's ``AWS_ACCESS_KEY_ID``...).
        shared_fs_claim (str | None): a PersistentVolumeClaim (ReadWriteMany) mounted at
            ``shared_fs_mount_path`` for ``shared_fs`` checkpoint storage; both or neither.
        shared_fs_mount_path (str | None): where the claim is mounted: the ``host_path`` of
            the experiments' ``shared_fs`` storage.
        master_url (str | None): the master's URL as the pods reach it.
        work_dir (str): the runs' working directory in the pod (an ``emptyDir``).
        name_prefix (str): the objects' names are ``<name_prefix>-r<run>``; distinct per
            Headway installation sharing a namespace.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    namespace: str
    image: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\s]+$")]
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    python: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\s]+$")] = "python"
    gang: Literal["kueue", "coscheduling"] = KUEUE
    queue_name: str | None = None
    scheduler_name: str | None = None
    schedule_timeout_seconds: Annotated[int, Field(ge=1, le=86400)] = 600
    priority_class_name: str | None = None
    service_account: str | None = None
    node_selector: Annotated[dict[str, str], Field(max_length=32)] = {}
    tolerations: Annotated[list[Toleration], Field(max_length=32)] = []
    image_pull_secrets: Annotated[list[str], Field(max_length=8)] = []
    slots_per_node: Annotated[int, Field(ge=1, le=1024)] | None = None
    gpu_resource: str = "nvidia.com/gpu"
    gpus_per_slot: Annotated[int, Field(ge=0, le=16)] = 1
    cpu_per_slot: str | None = None
    memory_per_slot: str | None = None
    shm_size: str | None = None
    termination_grace_seconds: Annotated[int, Field(ge=1, le=86400)] = 120
    active_deadline_seconds: Annotated[int, Field(ge=1)] | None = None
    keep_finished_seconds: Annotated[int, Field(ge=0)] = 3600
    storage_secret: str | None = None
    shared_fs_claim: str | None = None
    shared_fs_mount_path: str | None = None
    master_url: Annotated[str, Field(pattern=r"^https?://[^\s'\"\\]+$")] | None = None
    work_dir: Annotated[str, Field(pattern=r"^/[^\s]*$")] = "/var/lib/headway"
    name_prefix: Annotated[str, Field(max_length=30)] = "headway"

    @field_validator("namespace", "queue_name", "name_prefix")
    @classmethod
    def _check_label(cls, value: str | None) -> str | None:
        return value if value is None else check_dns_label(value)

    @field_validator(
        "scheduler_name",
        "priority_class_name",
        "service_account",
        "storage_secret",
        "shared_fs_claim",
    )
    @classmethod
    def _check_subdomain(cls, value: str | None) -> str | None:
        return value if value is None else check_dns_subdomain(value)

    @field_validator("image_pull_secrets")
    @classmethod
    def _check_secrets(cls, values: list[str]) -> list[str]:
        return [check_dns_subdomain(value, "Secret name") for value in values]

    @field_validator("node_selector")
    @classmethod
    def _check_selector(cls, values: dict[str, str]) -> dict[str, str]:
        for key, value in values.items():
            check_qualified_name(key, "label key")
            check_label_value(value)
        return values

    @field_validator("gpu_resource")
    @classmethod
    def _check_resource(cls, value: str) -> str:
        return check_qualified_name(value, "resource name")

    @field_validator("cpu_per_slot", "memory_per_slot", "shm_size")
    @classmethod
    def _check_quantity(cls, value: str | None) -> str | None:
        return value if value is None else check_quantity(value)

    @field_validator("shared_fs_mount_path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or any(c in value for c in "\n\r\0:")):
            raise ValueError(f"{value!r} is not an absolute path")
        return value

    @model_validator(mode="after")
    def _check_together(self) -> KubernetesPoolSettings:
        # A model validator's error has no field of its own: each message starts with it.
        if self.gang == KUEUE and self.queue_name is None:
            raise ValueError("queue_name: required with gang: kueue (the Kueue LocalQueue)")
        if self.gang == COSCHEDULING and self.queue_name is not None:
            raise ValueError("queue_name: only with gang: kueue (coscheduling uses a PodGroup)")
        if (self.shared_fs_claim is None) != (self.shared_fs_mount_path is None):
            raise ValueError("shared_fs_claim and shared_fs_mount_path: set both or neither")
        return self

    @property
    def pod_scheduler(self) -> str | None:
        """The pods' ``schedulerName``: the setting, else the coscheduler for coscheduling,
        else None (the cluster's default scheduler)."""
        if self.scheduler_name is not None:
            return self.scheduler_name
        return DEFAULT_COSCHEDULER if self.gang == COSCHEDULING else None


KUBERNETES_FIELDS = frozenset(KubernetesPoolSettings.model_fields)
