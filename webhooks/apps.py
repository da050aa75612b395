from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Headway webhooks"

    def ready(self) -> None:
        # The registry never imports webhooks (an import contract): its model signals are
        # what this app listens to (webhooks/signals.py).
        from webhooks import signals

        signals.connect()
