"""Dashboard routes (mounted at ``/``)."""

from django.urls import path

from dashboard import bulk, controls, trial_page, views

app_name = "dashboard"
urlpatterns = [
    path("", views.experiments, name="experiments"),
    path("experiments/bulk", bulk.experiments_bulk, name="experiments-bulk"),
    path("experiments/<int:experiment_id>/", views.experiment, name="experiment"),
    path("experiments/<int:experiment_id>/live", views.experiment_live, name="experiment-live"),
    path("trials/<int:trial_id>/", trial_page.trial, name="trial"),
    path("trials/<int:trial_id>/logs/", views.trial_logs, name="trial-logs"),
    path("workers/", views.workers, name="workers"),
    path(
        "experiments/<int:experiment_id>/control/<str:action>",
        controls.experiment_control,
        name="experiment-control",
    ),
    path(
        "trials/<int:trial_id>/control/<str:action>", controls.trial_control, name="trial-control"
    ),
    path("trials/<int:trial_id>/continue", controls.trial_continue, name="trial-continue"),
]
