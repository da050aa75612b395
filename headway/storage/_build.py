"""``build_storage_manager(config)``: the storage backend named by ``checkpoint_storage``."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

from headway.storage._base import StorageManager
from headway.storage._shared_fs import SharedFSStorageManager


def _build_shared_fs(config: dict[str, Any]) -> StorageManager:
    host_path = config.get("host_path")
    if not isinstance(host_path, str) or not host_path:
        raise ValueError("checkpoint_storage.host_path is required for type 'shared_fs'" + _HINT)
    base = pathlib.Path(host_path).expanduser()
    if not base.is_absolute():
        raise ValueError(f"checkpoint_storage.host_path must be absolute, got {host_path!r}")
    storage_path = config.get("storage_path")
    if storage_path:
        sub = pathlib.PurePosixPath(str(storage_path))
        if sub.is_absolute() or ".." in sub.parts:
            raise ValueError(
                "checkpoint_storage.storage_path must be relative to host_path without '..', "
                f"got {storage_path!r}"
            )
        base = base / sub
    return SharedFSStorageManager(base)


def _build_s3(config: dict[str, Any]) -> StorageManager:
    from headway.storage._s3 import S3StorageManager  # boto3 is imported only when used

    if not config.get("bucket"):
        raise ValueError("checkpoint_storage.bucket is required for type 's3'" + _HINT)
    storage_path = config.get("storage_path")
    if storage_path:
        # A sub-path inside the location: one more key prefix (the server stores it merged).
        sub = str(storage_path).strip("/")
        prefix = str(config.get("prefix") or "").strip("/")
        config = {**config, "prefix": f"{prefix}/{sub}" if prefix else sub}
    return S3StorageManager.from_config(config)


# A config the server resolved has the location's fields; a bare ``location`` name means
# nothing outside the server (local mode).
_HINT = (
    " (a bare `location` name is resolved by the server at submission; outside a cluster give "
    "the folder or bucket itself)"
)


# One builder per ``type``; a new backend adds one entry.
_BUILDERS: dict[str, Callable[[dict[str, Any]], StorageManager]] = {
    "shared_fs": _build_shared_fs,
    "s3": _build_s3,
}


def build_storage_manager(config: dict[str, Any]) -> StorageManager:
    """Return the ``StorageManager`` described by an experiment's ``checkpoint_storage`` dict.

    Arguments:
        config (dict): ``{"type": "shared_fs", "host_path": "/abs", "storage_path": None|"sub"}``
            or ``{"type": "s3", "bucket": ..., "prefix": ..., "storage_path": ...,
            "endpoint_url": ...}``; ``location`` (the server's name for the place) and the
            retention fields may be present and do not change where files go.

    Raises:
        ValueError: naming the field, for an unknown ``type`` (listing the allowed ones) or a
            missing / invalid field.
    """
    if not isinstance(config, dict):
        raise ValueError(f"checkpoint_storage must be a mapping, got {type(config).__name__}")
    kind = config.get("type")
    if kind is None and config.get("location"):
        raise ValueError("checkpoint_storage.type is required" + _HINT)
    builder = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if builder is None:
        allowed = ", ".join(sorted(_BUILDERS))
        raise ValueError(f"checkpoint_storage.type must be one of {allowed}; got {kind!r}")
    return builder(config)


# docs/internals.md spells it ``headway.storage.build``.
build = build_storage_manager
