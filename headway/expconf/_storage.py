"""``checkpoint_storage``: where an experiment's checkpoints go, and how many are kept.

The admin names the storage locations in the server's settings (``HEADWAY_STORAGE_LOCATIONS``,
docs/deployment.md), as Determined's master config names its ``checkpoint_storage``. A config
picks one of them:

- by name: ``{location: fast}`` (``type`` may be left out; the server fills it in);
- by its fields, as in Determined: ``{type: shared_fs, host_path: /srv/ckpt}`` or
  ``{type: s3, bucket: b, prefix: p}``, which the server maps to the location that holds that
  folder or bucket prefix;
- or not at all: the server's default location.

``storage_path`` names a sub-folder (a key prefix on S3) inside the chosen location. Anything
outside the admin's locations is refused by the server at submission, naming the field. This
module only checks the shape; ``registry.storage_locations`` resolves it against the settings.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, field_validator, model_validator

from headway.expconf._base import StrictModel, field_error, tagged_union

_NonNegativeInt = Annotated[int, Field(ge=0)]
# Location names appear in configs, settings files and error messages: a short token.
LOCATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


# A storage_path is joined under the location's root (and a checkpoint's uuid below it): at most
# this many characters in all, so an S3 key (1,024 bytes) or a path stays within what storage
# accepts and configs stay small; each folder name at most NAME_MAX (255) bytes, as Linux
# filesystems and S3 consoles allow.
MAX_STORAGE_PATH_CHARS = 1024
MAX_STORAGE_PATH_SEGMENT_BYTES = 255


def check_sub_path(value: str | None) -> str | None:
    """Validate a ``storage_path``: a relative POSIX path without ``..``, ``.``, empty
    segments, backslashes or NUL, at most ``MAX_STORAGE_PATH_CHARS`` characters with each
    segment at most ``MAX_STORAGE_PATH_SEGMENT_BYTES`` bytes (UTF-8); returns it without
    surrounding slashes (None/"" -> None).

    Raises:
        ValueError: for anything else, with a message saying what is allowed.
    """
    if value is None:
        return None
    if len(value) > MAX_STORAGE_PATH_CHARS:
        raise ValueError(f"{len(value)} characters; at most {MAX_STORAGE_PATH_CHARS}")
    stripped = value.strip("/") if not value.startswith("/") else value
    if stripped == "":
        return None
    parts = stripped.split("/")
    if (
        stripped.startswith("/")
        or "\\" in stripped
        or "\x00" in stripped
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ValueError(
            f"must be a relative path inside the storage location (no leading '/', '..', '.', "
            f"empty segments or backslashes), got {value!r}"
        )
    for part in parts:
        if len(part.encode()) > MAX_STORAGE_PATH_SEGMENT_BYTES:
            raise ValueError(
                f"a folder name of {len(part.encode())} bytes; at most "
                f"{MAX_STORAGE_PATH_SEGMENT_BYTES} each"
            )
    return stripped


class _StorageConfig(StrictModel):
    """Fields every storage form shares: the location, a sub-path inside it, and Determined's
    checkpoint retention (garbage collection).

    When a trial or the experiment ends (or on ``POST experiments/{id}/checkpoints/gc/``), the
    registry keeps the union of each trial's ``save_trial_latest`` latest checkpoints (by
    ``steps_completed``), each trial's ``save_trial_best`` best and the experiment's
    ``save_experiment_best`` best (by the searcher metric of the validation reported at the
    checkpoint's step) and deletes the files of the others (docs/checkpoints.md).

    Attributes:
        location (str | None): name of one of the server's storage locations; None: the one
            whose folder or bucket the other fields name, else the server's default.
        storage_path (str | None): sub-folder (S3: key prefix) inside the location.
        save_experiment_best (int): best checkpoints kept across the experiment (default 0).
        save_trial_best (int): best checkpoints kept per trial (default 1).
        save_trial_latest (int): latest checkpoints kept per trial (default 1).
    """

    location: str | None = None
    storage_path: str | None = None
    save_experiment_best: _NonNegativeInt = 0
    save_trial_best: _NonNegativeInt = 1
    save_trial_latest: _NonNegativeInt = 1

    @field_validator("location")
    @classmethod
    def _check_location(cls, value: str | None) -> str | None:
        if value is not None and not LOCATION_NAME.fullmatch(value):
            raise ValueError(
                f"must be the name of a storage location (letters, digits, '.', '_', '-'), "
                f"got {value!r}"
            )
        return value

    @field_validator("storage_path")
    @classmethod
    def _check_storage_path(cls, value: str | None) -> str | None:
        return check_sub_path(value)


class LocationStorageConfig(_StorageConfig):
    """``checkpoint_storage: {location: NAME, storage_path?: SUB}`` without ``type``: the
    server fills in the location's type and fields at submission."""

    location: Annotated[str, Field(min_length=1)]


class SharedFSConfig(_StorageConfig):
    """``checkpoint_storage.type: shared_fs``: a directory every worker host mounts.

    Checkpoints go to ``<host_path>/<storage_path>/<uuid>/``. ``host_path`` may be left out; the
    server fills in the location's (the named one, else the default). A given ``host_path``
    must lie inside one of the server's shared_fs locations.
    """

    type: Literal["shared_fs"]
    host_path: Annotated[str, Field(min_length=1, max_length=MAX_STORAGE_PATH_CHARS)] | None = None


class S3Config(_StorageConfig):
    """``checkpoint_storage.type: s3``: an S3 (or S3-compatible, e.g. MinIO) bucket.

    Checkpoints go to ``s3://<bucket>/<prefix>/<storage_path>/<uuid>/``. ``bucket`` is required
    unless ``location`` names one; a given bucket, prefix and endpoint must match one of the
    server's s3 locations. Credentials are NOT part of the config (it is shown over the API):
    workers and the server read boto3's usual sources (``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY``, profiles, instance roles).
    """

    type: Literal["s3"]
    bucket: Annotated[str, Field(min_length=3, max_length=63)] | None = None
    prefix: Annotated[str, Field(max_length=MAX_STORAGE_PATH_CHARS)] = ""
    # URLs and region names are short: bounded so a config cannot carry megabytes in them.
    endpoint_url: Annotated[str, Field(max_length=2048)] | None = None
    region: Annotated[str, Field(max_length=64)] | None = None

    @model_validator(mode="after")
    def _bucket_or_location(self) -> S3Config:
        if self.bucket is None and self.location is None:
            raise field_error(
                "bucket", "required unless `location` names one of the server's s3 locations"
            )
        return self


def _untyped_storage(value: Any) -> str | None:
    # ``{location: NAME}`` without ``type`` (or the model it became, when serialising);
    # anything else without ``type`` fails on ``type``.
    if isinstance(value, LocationStorageConfig):
        return "location"
    if isinstance(value, dict) and "type" not in value and "location" in value:
        return "location"
    return None


if TYPE_CHECKING:
    CheckpointStorageConfig: TypeAlias = SharedFSConfig | S3Config | LocationStorageConfig
else:
    CheckpointStorageConfig = tagged_union(
        "storage",
        "type",
        {"shared_fs": SharedFSConfig, "s3": S3Config, "location": LocationStorageConfig},
        fallback=_untyped_storage,
        hidden=("location",),
    )
