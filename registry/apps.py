from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Headway registry"

    def ready(self) -> None:
        # A bad resource pools file (HEADWAY_RESOURCE_POOLS) stops every process at start-up,
        # naming the file, entry and field, rather than failing the first submission.
        from django.conf import settings

        from registry.pools import add_poll_entries, resource_pools

        resource_pools()
        # Each pool type that polls gets its beat entry (the settings never import the apps).
        add_poll_entries(settings.CELERY_BEAT_SCHEDULE, settings.CELERY_TASK_DEFAULT_QUEUE)
