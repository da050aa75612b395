"""Which storage endpoints the registry may talk to (no SSRF).

An experiment's ``checkpoint_storage.endpoint_url`` is user input, but the registry (downloads,
checkpoint GC and deletion) sends signed S3 requests there with the server's credentials. So a
config may name only an endpoint the server's administrator listed in
``HEADWAY_STORAGE_ENDPOINTS`` (or the server's own ``HEADWAY_S3_ENDPOINT_URL``); without
``endpoint_url`` boto3 uses AWS's own endpoints. The check runs at experiment creation (a 400
naming ``config.checkpoint_storage.endpoint_url``) and again every time the registry builds a
storage manager from a stored config (``registry_storage_manager``), so a config stored before
the allow-list (or before it shrank) is refused too. Trial processes are not the registry: they
build their storage manager with ``headway.storage`` directly.

The place itself (folder, bucket, prefix) must also be one of the admin's
storage locations (``registry.storage_locations``); this check comes first, so a stored config
naming a disallowed endpoint is refused before anything else is looked at.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings

from config.outbound import endpoint_keys
from config.storage_locations import normalize_endpoint
from headway.storage import StorageManager
from registry.errors import InvalidInput
from registry.storage_locations import location_manager, locations

__all__ = ["FIELD", "check_storage_endpoint", "normalize_endpoint", "registry_storage_manager"]

FIELD = "checkpoint_storage.endpoint_url"


def allowed_endpoints() -> set[tuple[str, str, int]]:
    """The normalized endpoints of ``HEADWAY_STORAGE_ENDPOINTS``, the server's own
    ``HEADWAY_S3_ENDPOINT_URL`` and the s3 storage locations' (all set by the administrator)."""
    urls = list(settings.HEADWAY_STORAGE_ENDPOINTS)
    own = os.environ.get("HEADWAY_S3_ENDPOINT_URL")
    if own:
        urls.append(own)
    urls += [loc.endpoint_url for loc in locations().locations.values() if loc.endpoint_url]
    return endpoint_keys(urls)


def endpoint_error(storage: Any) -> str | None:
    """Why ``storage`` (a ``checkpoint_storage`` dict) names an endpoint the registry must not
    call, or None when it names none or an allowed one."""
    if not isinstance(storage, dict):
        return None
    url = storage.get("endpoint_url")
    if url in (None, ""):
        return None
    if not isinstance(url, str):
        return "must be a URL string"
    key = normalize_endpoint(url)
    if key is None:
        return f"{url!r} is not an http(s) URL of a host (no path, query or credentials)"
    if key not in allowed_endpoints():
        return (
            f"{url!r} is not one of the storage endpoints this server allows "
            "(HEADWAY_STORAGE_ENDPOINTS); leave it out to use AWS S3, or ask an administrator"
        )
    return None


def check_storage_endpoint(storage: Any, field: str = f"config.{FIELD}") -> None:
    """Raise ``InvalidInput`` naming ``field`` when ``storage`` names a disallowed endpoint."""
    error = endpoint_error(storage)
    if error is not None:
        raise InvalidInput({field: [error]})


def registry_storage_manager(storage: dict[str, Any]) -> StorageManager:
    """The storage manager for the registry's own use (downloads, GC, deletion): refuses (with
    ``InvalidInput``) a stored config whose endpoint is not allowed, or whose place is outside
    the admin's storage locations (``registry.storage_locations.location_manager``), before any
    request is made.

    Raises:
        InvalidInput: disallowed endpoint (``checkpoint_storage.endpoint_url``), or a place
            outside the locations (``checkpoint_storage.<field>``).
        ValueError: an invalid config (``build_storage_manager``).
    """
    check_storage_endpoint(storage, field=FIELD)
    return location_manager(storage)
