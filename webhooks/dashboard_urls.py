"""The dashboard's webhooks page (``/webhooks/``), in namespace ``webhooks``."""

from django.urls import path

from webhooks import views

app_name = "webhooks"
urlpatterns = [path("", views.webhook_list, name="list")]
