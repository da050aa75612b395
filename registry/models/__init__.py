"""Registry models, one module per resource (re-exported here, as NetBox does)."""

from registry.models._locked_trial import lock_trial
from registry.models.checkpoint import Checkpoint, CheckpointState
from registry.models.component_beat import ComponentBeat
from registry.models.experiment import Experiment, blob_fields
from registry.models.host import HostAdminState, RunShare, WorkerHost
from registry.models.host_token import HostToken
from registry.models.hparam_importance import FitState, HparamImportanceFit
from registry.models.logs import TrialLog
from registry.models.metrics import MetricBucket, MetricReport, MetricSeries
from registry.models.model_registry import (
    AliasAction,
    ModelAlias,
    ModelAliasEvent,
    ModelVersion,
    RegisteredModel,
)
from registry.models.search_value import TrialSearchValue
from registry.models.states import TERMINAL_STATES, RunState, State, StopReason
from registry.models.trial import Trial, TrialRun
from registry.models.unmanaged import UnmanagedRun
from registry.models.workspace import (
    DEFAULT_NAME,
    ROLE_ORDER,
    Project,
    Role,
    RoleBinding,
    Workspace,
    default_project,
)

__all__ = [
    "DEFAULT_NAME",
    "ROLE_ORDER",
    "TERMINAL_STATES",
    "AliasAction",
    "Checkpoint",
    "CheckpointState",
    "ComponentBeat",
    "Experiment",
    "FitState",
    "HostAdminState",
    "HostToken",
    "HparamImportanceFit",
    "MetricBucket",
    "MetricReport",
    "MetricSeries",
    "ModelAlias",
    "ModelAliasEvent",
    "ModelVersion",
    "Project",
    "RegisteredModel",
    "Role",
    "RoleBinding",
    "RunShare",
    "RunState",
    "State",
    "StopReason",
    "Trial",
    "TrialLog",
    "TrialRun",
    "TrialSearchValue",
    "UnmanagedRun",
    "WorkerHost",
    "Workspace",
    "blob_fields",
    "default_project",
    "lock_trial",
]

# The pool types' own models (registry/pools/<type>/models.py), found without naming a type:
# imported here so Django registers them with this app while it loads it.
from registry.pools.discovery import import_pool_models

import_pool_models()
