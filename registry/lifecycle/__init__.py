"""Every state change of experiments, trials, runs and checkpoints happens here.

Views, the REST API, workers and management commands call these functions; none of them writes
a state field itself. Each transition locks the rows it changes (``select_for_update`` with
``no_key=True``, always trials before their experiment, so two transitions cannot deadlock; rows
that reference a locked one, a log line or a metric point, can still be inserted meanwhile) or uses a conditional
UPDATE, so a double click, a retried task or a racing worker cannot corrupt state.
Semantics follow Determined (docs/lifecycle.md).
"""

from registry.lifecycle._checkpoint_deletion import (
    CheckpointInUse,
    StorageFailure,
    checkpoint_delete,
    delete_checkpoint_files,
    experiment_delete,
    experiment_delete_run,
)
from registry.lifecycle._checkpoint_gc import (
    GCResult,
    checkpoint_gc,
    request_checkpoint_gc,
)
from registry.lifecycle._checkpoints import checkpoint_register
from registry.lifecycle._common import apply_deferred_operations
from registry.lifecycle._continue import trial_continue
from registry.lifecycle._edits import experiment_patch, trial_patch
from registry.lifecycle._experiments import (
    experiment_activate,
    experiment_archive,
    experiment_cancel,
    experiment_create,
    experiment_kill,
    experiment_pause,
    experiment_unarchive,
    parse_config_or_400,
)
from registry.lifecycle._orphans import SweepResult, checkpoint_orphan_sweep, delete_orphans
from registry.lifecycle._runs import (
    reap_lost_runs,
    trial_preempt_acknowledge,
    trial_report_early_exit,
    trial_report_progress,
    trial_run_claim,
    trial_run_exited,
    trial_run_heartbeat,
    trial_run_preempt,
    trial_run_running,
    trial_searcher_completed,
)
from registry.lifecycle._shares import (
    share_claim,
    share_exited,
    share_heartbeat,
    share_running,
    shares_publish_rendezvous,
)
from registry.lifecycle._transitions import (
    EXPERIMENT_CONTROLS,
    TRIAL_CONTROLS,
    Control,
    check_control,
    legal_controls,
)
from registry.lifecycle._trials import (
    trial_activate,
    trial_cancel,
    trial_kill,
    trial_pause,
)
from registry.lifecycle._unmanaged import (
    UnmanagedStart,
    reap_lost_unmanaged_runs,
    unmanaged_append_logs,
    unmanaged_heartbeat,
    unmanaged_run_exited,
    unmanaged_start,
)

__all__ = [
    "EXPERIMENT_CONTROLS",
    "TRIAL_CONTROLS",
    "CheckpointInUse",
    "Control",
    "GCResult",
    "StorageFailure",
    "SweepResult",
    "UnmanagedStart",
    "apply_deferred_operations",
    "check_control",
    "checkpoint_delete",
    "checkpoint_gc",
    "checkpoint_orphan_sweep",
    "checkpoint_register",
    "delete_checkpoint_files",
    "delete_orphans",
    "experiment_activate",
    "experiment_archive",
    "experiment_cancel",
    "experiment_create",
    "experiment_delete",
    "experiment_delete_run",
    "experiment_kill",
    "experiment_patch",
    "experiment_pause",
    "experiment_unarchive",
    "legal_controls",
    "parse_config_or_400",
    "reap_lost_runs",
    "reap_lost_unmanaged_runs",
    "request_checkpoint_gc",
    "share_claim",
    "share_exited",
    "share_heartbeat",
    "share_running",
    "shares_publish_rendezvous",
    "trial_activate",
    "trial_cancel",
    "trial_continue",
    "trial_kill",
    "trial_patch",
    "trial_pause",
    "trial_preempt_acknowledge",
    "trial_report_early_exit",
    "trial_report_progress",
    "trial_run_claim",
    "trial_run_exited",
    "trial_run_heartbeat",
    "trial_run_preempt",
    "trial_run_running",
    "trial_searcher_completed",
    "unmanaged_append_logs",
    "unmanaged_heartbeat",
    "unmanaged_run_exited",
    "unmanaged_start",
]
