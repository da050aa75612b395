"""Typed readers for environment variables (after healthchecks' ``envbool``/``envint``).

Each raises ``ImproperlyConfigured`` naming the variable when its value cannot be parsed, so a
typo in a deployment fails at start-up instead of silently falling back to a default.
"""

import os

from django.core.exceptions import ImproperlyConfigured


def envstr(name: str, default: str) -> str:
    """Return ``$name`` or ``default`` when unset or empty."""
    return os.environ.get(name) or default


def envbool(name: str, default: bool) -> bool:
    """Return ``$name`` as a bool; accepts true/false/1/0/yes/no (any case)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def envint(name: str, default: int) -> int:
    """Return ``$name`` as an int."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
