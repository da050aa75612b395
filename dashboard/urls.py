"""Dashboard routes (mounted at ``/``); the views are in ``dashboard.views``, one module per page."""

from django.urls import path

import registry.path_converters  # noqa: F401 (registers the <db_id:...> converter)
from dashboard.views import (
    compare,
    experiment,
    experiment_trials,
    experiments,
    hosts,
    model,
    models,
    saved_views,
    trial,
    trial_logs,
    workers,
    workspaces,
)

app_name = "dashboard"
urlpatterns = [
    path("", experiments.experiment_list, name="experiments"),
    path("experiments/bulk", experiments.experiment_bulk_control, name="experiments-bulk"),
    path("experiments/live", experiments.experiment_list_live, name="experiments-live"),
    path("experiments/<db_id:experiment_id>/", experiment.experiment_detail, name="experiment"),
    path(
        "experiments/<db_id:experiment_id>/live", experiment.experiment_live, name="experiment-live"
    ),
    path(
        "experiments/<db_id:experiment_id>/trials/",
        experiment_trials.experiment_trials_table,
        name="experiment-trials",
    ),
    path(
        "experiments/<db_id:experiment_id>/trials/data",
        experiment_trials.experiment_trials_data,
        name="experiment-trials-data",
    ),
    path(
        "experiments/<db_id:experiment_id>/trials/ids",
        experiment_trials.experiment_trials_ids,
        name="experiment-trials-ids",
    ),
    path(
        "experiments/<db_id:experiment_id>/views/",
        saved_views.experiment_view_save,
        name="experiment-view-save",
    ),
    path("views/", saved_views.list_view_save, name="list-view-save"),
    path("views/<db_id:view_id>/delete", saved_views.view_delete, name="view-delete"),
    path(
        "experiments/<db_id:experiment_id>/trials.csv",
        experiment_trials.experiment_trials_csv,
        name="experiment-trials-csv",
    ),
    path(
        "experiments/<db_id:experiment_id>/files/",
        experiment.experiment_files,
        name="experiment-files",
    ),
    path(
        "experiments/<db_id:experiment_id>/control/<str:action>",
        experiment.experiment_control,
        name="experiment-control",
    ),
    path(
        "experiments/<db_id:experiment_id>/edit", experiment.experiment_edit, name="experiment-edit"
    ),
    path(
        "experiments/<db_id:experiment_id>/notes",
        experiment.experiment_notes,
        name="experiment-notes",
    ),
    path("trials/<db_id:trial_id>/", trial.trial_detail, name="trial"),
    path("trials/<db_id:trial_id>/control/<str:action>", trial.trial_control, name="trial-control"),
    path("trials/<db_id:trial_id>/continue", trial.trial_continue, name="trial-continue"),
    path("trials/<db_id:trial_id>/menu", trial.trial_menu, name="trial-menu"),
    path("trials/<db_id:trial_id>/notes", trial.trial_notes, name="trial-notes"),
    path("trials/<db_id:trial_id>/logs/", trial_logs.trial_log_list, name="trial-logs"),
    path(
        "trials/<db_id:trial_id>/logs/download",
        trial_logs.trial_log_download,
        name="trial-logs-download",
    ),
    path("compare/", compare.trial_compare, name="compare"),
    path("workspaces/", workspaces.workspace_list, name="workspaces"),
    path("workspaces/<db_id:workspace_id>/", workspaces.workspace_detail, name="workspace"),
    # A project's page is the experiment list with the project fixed.
    path("projects/<db_id:project_id>/", experiments.experiment_list, name="project"),
    path("workers/", workers.worker_list, name="workers"),
    path("workers/<str:name>/<str:action>", hosts.host_control, name="host-control"),
    path("models/", models.model_list, name="models"),
    path("models/create", models.model_create, name="model-create"),
    path("models/register", models.model_version_register, name="model-register"),
    path("models/<str:name>/", model.model_detail, name="model"),
    path("models/<str:name>/archive", model.model_archive, name="model-archive"),
    path("models/<str:name>/edit", model.model_edit, name="model-edit"),
    path(
        "models/<str:name>/versions/<db_id:version>/delete",
        model.model_version_delete,
        name="model-version-delete",
    ),
    path(
        "models/<str:name>/versions/<db_id:version>/edit",
        model.model_version_edit,
        name="model-version-edit",
    ),
]
