"""The route table of ``RegistryAPI``: every REST call of the SDK, the CLI, the experimental
client and the host agent, by name -> (HTTP method, path template under ``/api/v1/``).

One entry per endpoint (as mlflow's ``rest_store`` routes each call through
``_METHOD_TO_INFO``); a test resolves every entry against the registry's URLconf
(``tests/registry/api/test_client_routes.py``) and another finds no API path written anywhere
else in ``headway/`` or ``workers/`` (``tests/headway/client/test_no_raw_api_paths.py``).
Placeholders are filled by ``str.format`` with the method's arguments.
"""

from __future__ import annotations

_RUN = "host-agent/trials/{trial_id}/runs/{run_id}/"
_SHARE = _RUN + "shares/{node_rank}/"

# The host agent's routes (host token) and the host-token admin routes: every one
# answers a wire model (a test checks the OpenAPI schema documents it).
HOST_ROUTES: dict[str, tuple[str, str]] = {
    "host_heartbeat": ("POST", "host-agent/heartbeat/"),
    "host_stopped": ("POST", "host-agent/stopped/"),
    "run_claim": ("POST", _RUN + "claim/"),
    "run_spec": ("GET", _RUN + "spec/"),
    "run_model_definition": ("GET", _RUN + "model-definition/"),
    "run_token": ("GET", _RUN + "token/"),
    "run_running": ("POST", _RUN + "running/"),
    "run_heartbeat": ("POST", _RUN + "heartbeat/"),
    "run_preempt": ("POST", _RUN + "preempt/"),
    "run_exit": ("POST", _RUN + "exit/"),
    "run_logs": ("POST", _RUN + "logs/"),
    "run_rendezvous": ("POST", _RUN + "rendezvous/"),
    "run_shares": ("GET", _RUN + "shares/"),
    "share_claim": ("POST", _SHARE + "claim/"),
    "share_spec": ("GET", _SHARE + "spec/"),
    "share_model_definition": ("GET", _SHARE + "model-definition/"),
    "share_token": ("GET", _SHARE + "token/"),
    "share_rendezvous": ("GET", _SHARE + "rendezvous/"),
    "share_running": ("POST", _SHARE + "running/"),
    "share_heartbeat": ("POST", _SHARE + "heartbeat/"),
    "share_logs": ("POST", _SHARE + "logs/"),
    "share_exit": ("POST", _SHARE + "exit/"),
    "host_token_list": ("GET", "host-tokens/"),
    "host_token_create": ("POST", "host-tokens/"),
    "host_token_revoke": ("DELETE", "host-tokens/{name}/"),
    # The admin's host operations (headway host ...).
    "host_list": ("GET", "hosts/"),
    "host_disable": ("POST", "hosts/{name}/disable/"),
    "host_enable": ("POST", "hosts/{name}/enable/"),
    "host_remove": ("DELETE", "hosts/{name}/"),
}

_TRIAL = "trials/{trial_id}/"

# A trial's own process (trial token): the Core API's reports and reads.
TRIAL_ROUTES: dict[str, tuple[str, str]] = {
    "trial_metrics_report": ("POST", _TRIAL + "metrics/"),
    "trial_checkpoint_report": ("POST", _TRIAL + "checkpoints/"),
    "trial_preempt_poll": ("GET", _TRIAL + "preempt/"),
    "trial_preempt_ack": ("POST", _TRIAL + "preempt/ack/"),
    "trial_progress": ("POST", _TRIAL + "progress/"),
    "trial_searcher_completed": ("POST", _TRIAL + "searcher/completed/"),
    "trial_searcher_early_exit": ("POST", _TRIAL + "searcher/early_exit/"),
    "checkpoint_metadata_add": ("POST", "checkpoints/{uuid}/metadata/"),
    # An unmanaged run (core_v2) heartbeats, sends its output and ends itself with its run token.
    "unmanaged_heartbeat": ("POST", "unmanaged/trials/{trial_id}/runs/{run_id}/heartbeat/"),
    "unmanaged_exit": ("POST", "unmanaged/trials/{trial_id}/runs/{run_id}/exit/"),
    "unmanaged_logs": ("POST", "unmanaged/trials/{trial_id}/runs/{run_id}/logs/"),
    # ... and may send its checkpoint files through the master (headway.storage._master).
    "unmanaged_checkpoint_file": (
        "PUT",
        "unmanaged/trials/{trial_id}/runs/{run_id}/checkpoints/{storage_id}/files/",
    ),
}

_EXPERIMENT = "experiments/{experiment_id}/"
_MODEL = "models/{name}/"
EXPERIMENT_ACTIONS = ("pause", "activate", "cancel", "kill", "archive", "unarchive")
TRIAL_ACTIONS = ("pause", "activate", "cancel", "kill")

# A user's calls (user token): the CLI's and the experimental client's.
USER_ROUTES: dict[str, tuple[str, str]] = {
    "login": ("POST", "auth/login/"),
    "experiment_create": ("POST", "experiments/"),
    "experiment_list": ("GET", "experiments/"),
    "experiment_get": ("GET", _EXPERIMENT),
    "experiment_delete": ("DELETE", _EXPERIMENT),
    "experiment_trials": ("GET", _EXPERIMENT + "trials/"),
    "experiment_checkpoints": ("GET", _EXPERIMENT + "checkpoints/"),
    **{f"experiment_{a}": ("POST", _EXPERIMENT + f"{a}/") for a in EXPERIMENT_ACTIONS},
    "trial_list": ("GET", "trials/"),
    "trial_get": ("GET", _TRIAL),
    "trial_checkpoints": ("GET", _TRIAL + "checkpoints/"),
    "trial_summary_metrics": ("GET", _TRIAL + "summary-metrics/"),
    "trial_logs": ("GET", _TRIAL + "logs/"),
    "trial_metrics_csv": ("GET", "trials/{trial_id}/metrics.csv"),
    "trial_continue": ("POST", _TRIAL + "continue/"),
    **{f"trial_{a}": ("POST", _TRIAL + f"{a}/") for a in TRIAL_ACTIONS},
    "checkpoint_get": ("GET", "checkpoints/{uuid}/"),
    "checkpoint_delete": ("DELETE", "checkpoints/{uuid}/"),
    # The router takes both forms; the clients have always sent it without the slash.
    "checkpoint_download": ("GET", "checkpoints/{uuid}/download"),
    "model_create": ("POST", "models/"),
    "model_list": ("GET", "models/"),
    "model_get": ("GET", _MODEL),
    "model_versions": ("GET", _MODEL + "versions/"),
    "model_version_create": ("POST", _MODEL + "versions/"),
    "model_version_get": ("GET", _MODEL + "versions/{version}/"),
    "model_aliases": ("GET", _MODEL + "aliases/"),
    "model_alias_history": ("GET", _MODEL + "aliases/history/"),
    "model_alias_set": ("PUT", _MODEL + "aliases/{alias}/"),
    "model_alias_delete": ("DELETE", _MODEL + "aliases/{alias}/"),
    "model_alias_resolve": ("GET", "models/{name}@{alias}/"),
    "worker_list": ("GET", "workers/"),
    "resource_pool_list": ("GET", "resource-pools/"),
    "pool_node_enable": ("POST", "resource-pools/{pool}/nodes/{node}/enable/"),
    # Workspaces and projects (headway workspace / project / experiment move).
    "workspace_create": ("POST", "workspaces/"),
    "workspace_list": ("GET", "workspaces/"),
    "workspace_get": ("GET", "workspaces/{workspace_id}/"),
    "workspace_archive": ("POST", "workspaces/{workspace_id}/archive/"),
    "workspace_unarchive": ("POST", "workspaces/{workspace_id}/unarchive/"),
    "workspace_members": ("GET", "workspaces/{workspace_id}/members/"),
    "workspace_grant": ("POST", "workspaces/{workspace_id}/members/"),
    "workspace_revoke": ("DELETE", "workspaces/{workspace_id}/members/{binding_id}/"),
    "project_create": ("POST", "projects/"),
    "project_list": ("GET", "projects/"),
    "project_get": ("GET", "projects/{project_id}/"),
    "project_archive": ("POST", "projects/{project_id}/archive/"),
    "project_unarchive": ("POST", "projects/{project_id}/unarchive/"),
    "experiment_move": ("POST", _EXPERIMENT + "move/"),
    # A script run outside the cluster starts its own (unmanaged) run: core_v2.init().
    "unmanaged_start": ("POST", "unmanaged/"),
    # An admin's webhooks (headway webhook ...).
    "webhook_create": ("POST", "webhooks/"),
    "webhook_list": ("GET", "webhooks/"),
    "webhook_get": ("GET", "webhooks/{webhook_id}/"),
    "webhook_delete": ("DELETE", "webhooks/{webhook_id}/"),
    "webhook_deliveries": ("GET", "webhooks/{webhook_id}/deliveries/"),
    "webhook_test": ("POST", "webhooks/{webhook_id}/test/"),
}

ROUTES: dict[str, tuple[str, str]] = {**HOST_ROUTES, **TRIAL_ROUTES, **USER_ROUTES}
