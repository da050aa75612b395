"""Dashboard routes (mounted at ``/``)."""

from django.urls import path

from dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.experiments, name="experiments"),
    path("experiments/<int:experiment_id>/", views.experiment, name="experiment"),
    path("experiments/<int:experiment_id>/live", views.experiment_live, name="experiment-live"),
    path("trials/<int:trial_id>/logs/", views.trial_logs, name="trial-logs"),
]
