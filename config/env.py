"""Typed readers for environment variables (after healthchecks' ``envbool``/``envint``).

Each raises ``ImproperlyConfigured`` naming the variable when its value cannot be parsed, so a
typo in a deployment fails at start-up instead of silently falling back to a default.
"""

import math
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


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return ``$name`` as an int; with ``minimum``, a smaller value is refused."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        value = default
    else:
        try:
            value = int(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def envfloat(name: str, default: float, *, minimum: float | None = None) -> float:
    """Return ``$name`` as a finite float (seconds, mostly); with ``minimum``, a smaller value is
    refused.

    Raises:
        ImproperlyConfigured: naming ``name`` when the value is no finite number or is below
            ``minimum``.
    """
    raw = os.environ.get(name)
    if raw is None or raw == "":
        value = float(default)
    else:
        try:
            value = float(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
        if not math.isfinite(value):
            raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g}, got {value:g}")
    return value


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


# Keys and credentials that ship in examples and images (docker-compose.yml's old fallback,
# Django's startproject prefix, MinIO's root account): whoever read them knows the secret.
KNOWN_SECRET_KEYS = frozenset(
    {"change-me-in-production", "change-me", "changeme", "secret", "secret-key", "insecure"}
)
KNOWN_S3_CREDENTIALS = frozenset({("minioadmin", "minioadmin")})


def refuse_default_credentials(
    secret_key: str, *, embedded: bool, environ: "os._Environ[str] | dict[str, str]" = os.environ
) -> None:
    """Stop start-up on a published default secret.

    ``secret_key`` may never be one of ``KNOWN_SECRET_KEYS`` nor start with Django's
    ``django-insecure-``. Outside the embedded single-machine setup (``embedded`` False:
    ``DATABASE_URL`` is not SQLite), ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (what
    the registry and the bucket step sign S3 requests with) may not be MinIO's default root
    account; ``make demo`` (SQLite) may talk to a local MinIO that still has it.

    Raises:
        ImproperlyConfigured: naming the variable and how to make a value.
    """
    make = "e.g. $(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    if secret_key.strip().lower() in KNOWN_SECRET_KEYS or secret_key.startswith("django-insecure-"):
        raise ImproperlyConfigured(f"SECRET_KEY is a published default; set a random one, {make}")
    pair = (environ.get("AWS_ACCESS_KEY_ID", ""), environ.get("AWS_SECRET_ACCESS_KEY", ""))
    if not embedded and pair in KNOWN_S3_CREDENTIALS:
        raise ImproperlyConfigured(
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are MinIO's default root account "
            "(minioadmin); give MinIO its own (MINIO_ROOT_USER, MINIO_ROOT_PASSWORD) and Headway "
            f"the same or an access key of its own, {make}"
        )
