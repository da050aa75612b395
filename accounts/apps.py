"""The ``accounts`` Django app."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Single sign-on identities (``accounts.models``) and their views."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
