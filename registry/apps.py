from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Headway registry"

    def ready(self) -> None:
        # A bad resource pools file (HEADWAY_RESOURCE_POOLS) stops every process at start-up,
        # naming the file, entry and field, rather than failing the first submission.
        from registry.pools import resource_pools

        resource_pools()
