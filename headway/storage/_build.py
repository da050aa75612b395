"""``build_storage_manager(config)``: the storage backend named by ``checkpoint_storage``.

The section is validated by the experiment config's own models (``headway.expconf``:
``SharedFSConfig``, ``S3Config``), so a store is built from typed fields, never from keys. The
server adds one field of its own when it builds a store for itself: an s3 location's
``public_endpoint_url`` (the name presigned links use).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationError

from headway.expconf import ConfigError, S3Config, SharedFSConfig
from headway.storage._base import StorageManager
from headway.storage._shared_fs import SharedFSStorageManager

if TYPE_CHECKING:
    from pydantic import BaseModel


class S3Place(S3Config):
    """An s3 ``checkpoint_storage`` as the server builds its own store from it: the config's
    fields and the location's ``public_endpoint_url`` (presigned links name it; trial
    processes never presign)."""

    public_endpoint_url: Annotated[str, Field(max_length=2048)] | None = None


def _build_shared_fs(config: SharedFSConfig) -> StorageManager:
    if not config.host_path:
        raise ValueError("checkpoint_storage.host_path is required for type 'shared_fs'" + _HINT)
    base = pathlib.Path(config.host_path).expanduser()
    if not base.is_absolute():
        raise ValueError(f"checkpoint_storage.host_path must be absolute, got {config.host_path!r}")
    # storage_path is already a relative path without '..' (``check_sub_path``).
    return SharedFSStorageManager(base / config.storage_path if config.storage_path else base)


def _build_s3(config: S3Place) -> StorageManager:
    from headway.storage._s3 import S3StorageManager  # boto3 is imported only when used

    if not config.bucket:
        raise ValueError("checkpoint_storage.bucket is required for type 's3'" + _HINT)
    prefix = config.prefix.strip("/")
    if config.storage_path:
        # A sub-path inside the location: one more key prefix (the server stores it merged).
        prefix = f"{prefix}/{config.storage_path}" if prefix else config.storage_path
    return S3StorageManager(
        config.bucket,
        prefix,
        endpoint_url=config.endpoint_url or os.environ.get("HEADWAY_S3_ENDPOINT_URL"),
        region=config.region,
        public_endpoint_url=config.public_endpoint_url,
    )


# A config the server resolved has the location's fields; a bare ``location`` name means
# nothing outside the server (local mode).
_HINT = (
    " (a bare `location` name is resolved by the server at submission; outside a cluster give "
    "the folder or bucket itself)"
)


# One entry per ``type``: the model its fields are validated by, and its builder.
_BUILDERS: dict[str, tuple[type[BaseModel], Callable[[Any], StorageManager]]] = {
    "shared_fs": (SharedFSConfig, _build_shared_fs),
    "s3": (S3Place, _build_s3),
}


def build_storage_manager(config: Mapping[str, Any] | SharedFSConfig | S3Config) -> StorageManager:
    """Return the ``StorageManager`` described by an experiment's ``checkpoint_storage``.

    Arguments:
        config (Mapping | SharedFSConfig | S3Config): the section, validated here by the
            config's models when a mapping: ``{"type": "shared_fs", "host_path": "/abs",
            "storage_path": None|"sub"}`` or ``{"type": "s3", "bucket": ..., "prefix": ...,
            "storage_path": ..., "endpoint_url": ..., "region": ...}`` (the server's own stores
            may add ``public_endpoint_url``); ``location`` (the server's name for the place)
            and the retention fields may be present and do not change where files go.

    Raises:
        ValueError: naming the field (``checkpoint_storage.<field>``), for an unknown ``type``
            (listing the allowed ones) or a missing / invalid field.
    """
    if isinstance(config, SharedFSConfig | S3Config):
        config = config.model_dump(exclude_unset=True)
    if not isinstance(config, Mapping):
        raise ValueError(f"checkpoint_storage must be a mapping, got {type(config).__name__}")
    kind = config.get("type")
    if kind is None and config.get("location"):
        raise ValueError("checkpoint_storage.type is required" + _HINT)
    entry = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        allowed = ", ".join(sorted(_BUILDERS))
        raise ValueError(f"checkpoint_storage.type must be one of {allowed}; got {kind!r}")
    model, builder = entry
    try:
        typed = model.model_validate(dict(config))
    except ValidationError as exc:
        error = ConfigError.from_validation_error(exc, model, prefix=("checkpoint_storage",))
        raise ValueError(
            "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in error.errors.items())
        ) from None
    return builder(typed)


# docs/internals.md spells it ``headway.storage.build``.
build = build_storage_manager
