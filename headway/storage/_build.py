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
        raise ValueError("checkpoint_storage.host_path is required for type 'shared_fs'")
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

    return S3StorageManager.from_config(config)


# One builder per ``type``; a new backend adds one entry (STYLE.md §1, plugin-like features).
_BUILDERS: dict[str, Callable[[dict[str, Any]], StorageManager]] = {
    "shared_fs": _build_shared_fs,
    "s3": _build_s3,
}


def build_storage_manager(config: dict[str, Any]) -> StorageManager:
    """Return the ``StorageManager`` described by an experiment's ``checkpoint_storage`` dict.

    Arguments:
        config (dict): ``{"type": "shared_fs", "host_path": "/abs", "storage_path": None|"sub"}``
            or ``{"type": "s3", "bucket": ..., "prefix": ..., "endpoint_url": ...}``.

    Raises:
        ValueError: naming the field, for an unknown ``type`` (listing the allowed ones) or a
            missing / invalid field.
    """
    if not isinstance(config, dict):
        raise ValueError(f"checkpoint_storage must be a mapping, got {type(config).__name__}")
    kind = config.get("type")
    builder = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if builder is None:
        allowed = ", ".join(sorted(_BUILDERS))
        raise ValueError(f"checkpoint_storage.type must be one of {allowed}; got {kind!r}")
    return builder(config)


# docs/internals.md spells it ``headway.storage.build``.
build = build_storage_manager
