"""Typed readers for environment variables (after healthchecks' ``envbool``/``envint``).

Each raises ``ImproperlyConfigured`` naming the variable when its value cannot be parsed, so a
typo in a deployment fails at start-up instead of silently falling back to a default.
"""

import os
import secrets
from pathlib import Path

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


def embedded_secret_key(var_dir: Path, *, allowed: bool) -> str:
    """The embedded setup's ``SECRET_KEY``: random, made once in ``var_dir/secret_key`` (0600)
    and shared by the web server and worker that use that folder.

    Raises:
        ImproperlyConfigured: when ``allowed`` is False (a deployment: ``SECRET_KEY`` must be set).
    """
    if not allowed:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DATABASE_URL is not SQLite (a deployment); e.g. "
            "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    path = var_dir / "secret_key"
    if not path.exists():
        # Written aside, then linked into place: a racing process either links first or reads
        # the complete key.
        tmp = var_dir / f"secret_key.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = path.read_text().strip()
    if not key:
        raise ImproperlyConfigured(f"SECRET_KEY is unset and {path} is empty")
    return key
