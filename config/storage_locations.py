"""The admin's checkpoint storage locations: ``HEADWAY_STORAGE_LOCATIONS`` names a YAML file.

Determined's master config names the checkpoint storage; experiments may not aim the
registry's rights at any other folder or bucket. Headway's settings do the same
with named locations (docs/deployment.md, "Storage locations")::

    default: shared            # optional when only one location is named
    locations:
      shared: {type: shared_fs, host_path: /srv/headway/checkpoints}
      minio:  {type: s3, bucket: checkpoints, prefix: headway, endpoint_url: http://minio:9000,
               public_endpoint_url: https://s3.example.com}

Unset, the embedded default is one location, ``default``: ``shared_fs`` at
``HEADWAY_CHECKPOINT_DIR`` (``registry.storage_locations.locations``). This module only reads
and checks the file (at settings import, so a typo stops the server at start-up); resolving an
experiment's ``checkpoint_storage`` against it is ``registry.storage_locations``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from headway.expconf._storage import LOCATION_NAME

ENV = "HEADWAY_STORAGE_LOCATIONS"
DEFAULT_NAME = "default"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_FILE_BYTES = 1 << 20


def url_origin(url: str, *, bare: bool = False) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL with a host and no credentials or fragment;
    with ``bare``, also no path (but ``/``) or query. None for anything else (``ftp:``,
    ``http://u:p@h``, no host; ``http://h/x`` when ``bare``)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.username or parts.password or parts.fragment:
        return None
    if bare and (parts.query or parts.path not in ("", "/")):
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def normalize_endpoint(url: str) -> tuple[str, str, int] | None:
    """``url_origin`` of an endpoint URL (``bare``: no path or query): what
    ``HEADWAY_STORAGE_ENDPOINTS`` and ``HEADWAY_WEBHOOK_ENDPOINTS`` list."""
    return url_origin(url, bare=True)


@dataclasses.dataclass(frozen=True)
class StorageLocation:
    """One named place checkpoints may go.

    Attributes:
        name (str): what ``checkpoint_storage.location`` says.
        type (str): ``shared_fs`` or ``s3``.
        host_path (str | None): shared_fs: absolute, normalised root folder.
        bucket, prefix (str | None, str): s3: the bucket and the key prefix (no surrounding
            ``/``; "" for the whole bucket).
        endpoint_url, region (str | None): s3: the endpoint (None: ``HEADWAY_S3_ENDPOINT_URL``,
            else AWS) and region.
        public_endpoint_url (str | None): s3: the same service as users reach it, named by the
            presigned download links the registry redirects to (None: ``endpoint_url``); an
            internal name such as ``http://minio:9000`` resolves for no user.
    """

    name: str
    type: str
    host_path: str | None = None
    bucket: str | None = None
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    public_endpoint_url: str | None = None

    def storage_config(self) -> dict[str, Any]:
        """The location's own fields as a ``checkpoint_storage`` dict (no sub-path)."""
        if self.type == "shared_fs":
            return {"type": "shared_fs", "location": self.name, "host_path": self.host_path}
        return {
            "type": "s3",
            "location": self.name,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "endpoint_url": self.endpoint_url,
            "region": self.region,
        }


@dataclasses.dataclass(frozen=True)
class StorageLocations:
    """The admin's locations by name and the name of the default one."""

    locations: dict[str, StorageLocation]
    default: str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _SharedFS(_Strict):
    type: Literal["shared_fs"]
    host_path: Annotated[str, Field(min_length=1)]


class _S3(_Strict):
    type: Literal["s3"]
    bucket: Annotated[str, Field(min_length=3, max_length=63)]
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    public_endpoint_url: str | None = None


class _File(_Strict):
    default: str | None = None
    locations: Annotated[
        dict[str, Annotated[_SharedFS | _S3, Field(discriminator="type")]], Field(min_length=1)
    ]


def _location(name: str, spec: _SharedFS | _S3) -> StorageLocation:
    where = f"{ENV}: locations.{name}"
    if not LOCATION_NAME.fullmatch(name):
        raise ImproperlyConfigured(f"{where}: a name is letters, digits, '.', '_' or '-'")
    if isinstance(spec, _SharedFS):
        if not os.path.isabs(spec.host_path):
            raise ImproperlyConfigured(f"{where}.host_path must be absolute: {spec.host_path!r}")
        return StorageLocation(name, "shared_fs", host_path=os.path.normpath(spec.host_path))
    for field in ("endpoint_url", "public_endpoint_url"):
        url = getattr(spec, field)
        if url is not None and normalize_endpoint(url) is None:
            raise ImproperlyConfigured(f"{where}.{field} must be an http(s) URL of a host: {url!r}")
    return StorageLocation(
        name,
        "s3",
        bucket=spec.bucket,
        prefix=spec.prefix.strip("/"),
        endpoint_url=spec.endpoint_url,
        region=spec.region,
        public_endpoint_url=spec.public_endpoint_url,
    )


def load_storage_locations(path: str) -> StorageLocations:
    """Read and check the locations file at ``path`` (YAML or JSON).

    Raises:
        ImproperlyConfigured: naming ``HEADWAY_STORAGE_LOCATIONS`` and the bad field: an
            unreadable file, an unknown key or type, a relative ``host_path``, a bad
            ``endpoint_url`` or ``public_endpoint_url``, or a ``default`` that names no location (required when there are
            several).
    """
    try:
        raw = Path(path).read_bytes()[: _MAX_FILE_BYTES + 1]
        if len(raw) > _MAX_FILE_BYTES:
            raise ImproperlyConfigured(f"{ENV}: {path} is over {_MAX_FILE_BYTES} bytes")
        data = yaml.safe_load(raw)
        parsed = _File.model_validate(data)
    except OSError as exc:
        raise ImproperlyConfigured(f"{ENV}: cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"{ENV}: {path} is not YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ImproperlyConfigured(f"{ENV}: {path}: {where}: {first['msg']}") from None
    locations = {name: _location(name, spec) for name, spec in parsed.locations.items()}
    default = parsed.default
    if default is None:
        if len(locations) > 1:
            raise ImproperlyConfigured(f"{ENV}: {path}: `default` must name one of the locations")
        default = next(iter(locations))
    if default not in locations:
        raise ImproperlyConfigured(
            f"{ENV}: {path}: default {default!r} is not one of {', '.join(sorted(locations))}"
        )
    return StorageLocations(locations=locations, default=default)


def embedded_locations(checkpoint_dir: str | os.PathLike[str]) -> StorageLocations:
    """The embedded default: one shared_fs location ``default`` at ``checkpoint_dir``."""
    root = StorageLocation(DEFAULT_NAME, "shared_fs", host_path=os.path.normpath(checkpoint_dir))
    return StorageLocations(locations={DEFAULT_NAME: root}, default=DEFAULT_NAME)
