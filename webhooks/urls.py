"""Routes of ``/api/v1/webhooks/`` (included by ``registry.api.urls`` into its namespace)."""

from django.urls import path

from webhooks import api

urlpatterns = [
    path("", api.WebhookListView.as_view(), name="webhook-list"),
    path("<db_id:webhook_id>/", api.WebhookDetailView.as_view(), name="webhook-detail"),
    path(
        "<db_id:webhook_id>/deliveries/",
        api.WebhookDeliveriesView.as_view(),
        name="webhook-deliveries",
    ),
    path("<db_id:webhook_id>/test/", api.WebhookTestView.as_view(), name="webhook-test"),
]
