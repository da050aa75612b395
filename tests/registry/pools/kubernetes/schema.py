"""Checking generated Kubernetes objects by machine, without a control plane.

Core objects (Job, Service, Secret) are read by the official ``kubernetes`` client's models,
generated from Kubernetes' OpenAPI schema: ``ApiClient`` deserialises the dict into ``V1Job``
etc. (client-side validation on: a missing required field such as a container's ``name``
raises), then ``sanitize_for_serialization`` writes it back, and the two must be equal, since
the models keep only the fields the schema defines: a misspelt or misplaced field vanishes and
the difference names its path. The generated models do not check enums, so the enum fields the
specs use are checked against the values Kubernetes' API reference lists (``ENUMS``).

The PodGroup is a CRD the client does not know: ``PodGroup`` below is its ``openAPIV3Schema``
written as pydantic models (unknown fields refused, int32 bounds, the quantity pattern), from
the scheduler-plugins CRD ``manifests/coscheduling/crd.yaml`` (``podgroups.scheduling.x-k8s.io``,
version ``v1alpha1``) in github.com/kubernetes-sigs/scheduler-plugins.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from kubernetes.client import ApiClient, Configuration
from pydantic import BaseModel, ConfigDict, Field

MODELS = {
    ("batch/v1", "Job"): "V1Job",
    ("v1", "Service"): "V1Service",
    ("v1", "Secret"): "V1Secret",
}

# Field name (camelCase, anywhere in an object) -> the values Kubernetes accepts (API reference,
# v1.36: Job, PodSpec, Container, Toleration, PodFailurePolicy, EmptyDirVolumeSource, Service).
ENUMS: dict[str, set[str]] = {
    "completionMode": {"NonIndexed", "Indexed"},
    "restartPolicy": {"Always", "OnFailure", "Never"},
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "action": {"FailJob", "FailIndex", "Ignore", "Count"},
    # Pod failure policy exit codes (In, NotIn), tolerations (Equal, Exists), node selector
    # requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt).
    "operator": {"In", "NotIn", "Equal", "Exists", "DoesNotExist", "Gt", "Lt"},
    "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"},
    "medium": {"", "Memory"},
    "podManagementPolicy": {"OrderedReady", "Parallel"},
}

_INT32 = 2**31 - 1


class SchemaError(AssertionError):
    """A generated object does not match Kubernetes' schema (the message names the path)."""


def _differences(sent: Any, kept: Any, path: str) -> list[str]:
    if isinstance(sent, dict) and isinstance(kept, dict):
        found = [f"{path}.{key}: dropped (not in the schema)" for key in sent if key not in kept]
        found += [f"{path}.{key}: added" for key in kept if key not in sent]
        for key in sent.keys() & kept.keys():
            found += _differences(sent[key], kept[key], f"{path}.{key}")
        return found
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        found = []
        for index, (a, b) in enumerate(zip(sent, kept, strict=True)):
            found += _differences(a, b, f"{path}[{index}]")
        return found
    return [] if sent == kept else [f"{path}: sent {sent!r}, read back {kept!r}"]


def _enum_errors(value: Any, path: str) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            allowed = ENUMS.get(key)
            if allowed is not None and isinstance(item, str) and item not in allowed:
                found.append(f"{path}.{key}: {item!r} is not one of {sorted(allowed)}")
            found += _enum_errors(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _enum_errors(item, f"{path}[{index}]")
    return found


def validate_core(obj: dict[str, Any]) -> Any:
    """Check ``obj`` (a Job, Service or Secret dict) against the client's model of its kind;
    return the model instance.

    Raises:
        SchemaError: unknown kind, a field the model does not keep, a value changed on the
            way, an enum value outside Kubernetes' list.
        ValueError: the client's own validation (a required field missing).
    """
    model = MODELS.get((obj.get("apiVersion"), obj.get("kind")))
    if model is None:
        raise SchemaError(f"no client model for {obj.get('apiVersion')}/{obj.get('kind')}")
    configuration = Configuration()
    configuration.client_side_validation = True
    client = ApiClient(configuration)
    instance = client._ApiClient__deserialize(obj, model)  # type: ignore[attr-defined]
    kept = client.sanitize_for_serialization(instance)
    problems = _differences(obj, kept, obj["kind"]) + _enum_errors(obj, obj["kind"])
    if problems:
        raise SchemaError("; ".join(problems))
    return instance


# The PodGroup CRD's openAPIV3Schema (see module); metadata is "type: object" there, so the
# API server's own ObjectMeta rules apply: checked here for the fields the specs set.
_Quantity = Annotated[
    int
    | Annotated[
        str,
        Field(
            pattern=r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
        ),
    ],
    Field(union_mode="left_to_right"),
]
_Int32 = Annotated[int, Field(ge=-_INT32 - 1, le=_INT32)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PodGroupSpec(_Strict):
    """``spec`` of a PodGroup (``minMember``, ``minResources``, ``scheduleTimeoutSeconds``)."""

    minMember: _Int32 | None = None
    minResources: dict[str, _Quantity] | None = None
    scheduleTimeoutSeconds: _Int32 | None = None


class OwnerReference(_Strict):
    """``metadata.ownerReferences[]`` (ObjectMeta; required: apiVersion, kind, name, uid)."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    blockOwnerDeletion: bool | None = None


class ObjectMeta(_Strict):
    """The ``metadata`` fields the specs set."""

    name: str
    namespace: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    ownerReferences: list[OwnerReference] = []


class PodGroup(_Strict):
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup as created (no ``status``)."""

    apiVersion: Literal["scheduling.x-k8s.io/v1alpha1"]
    kind: Literal["PodGroup"]
    metadata: ObjectMeta
    spec: PodGroupSpec


def validate(obj: dict[str, Any]) -> Any:
    """``validate_core`` for core kinds, the ``PodGroup`` model for a PodGroup.

    Raises:
        SchemaError, ValueError: see ``validate_core``.
        pydantic.ValidationError: a PodGroup off its CRD's schema.
    """
    if obj.get("kind") == "PodGroup":
        return PodGroup.model_validate(obj)
    return validate_core(obj)
