"""An experiment's ``checkpoint_storage`` resolved against the admin's storage locations.

Before storage locations, ``host_path``, ``storage_path`` and ``bucket`` were free user input, and
the registry used them with its own rights: checkpoint GC listed and deleted in someone else's
folder or bucket, and a checkpoint registered under a uuid found there could be downloaded. Now the
places are the admin's (``HEADWAY_STORAGE_LOCATIONS``, config/storage_locations.py);
``resolve_storage`` maps a config onto one of them or refuses it naming the field:

- ``{location: NAME, storage_path?: SUB}``: that location, a sub-folder (S3: sub-prefix) in it;
- ``{type: shared_fs, host_path: P, storage_path?: S}``: the shared_fs location whose root
  holds ``P/S`` (lexically; ``registry_storage_manager`` also checks the real path);
- ``{type: s3, bucket: B, prefix?: P, endpoint_url?: E}``: the s3 location of bucket ``B`` at
  the same endpoint whose prefix holds ``P``;
- nothing (or only ``type``): the default location.

The resolved form names the location and spells out its fields, so trial processes (which
build their storage manager from the stored config, knowing nothing of the settings) write
exactly there. It is what experiment creation stores, what a registered checkpoint keeps, and
what downloads, GC and deletion use: a stored config is resolved again at every use, so an
experiment stored before the locations existed keeps working when an admin location holds its
folder or bucket, and is refused (naming the field) when none does.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Any

from django.conf import settings

from config.storage_locations import (
    StorageLocation,
    StorageLocations,
    embedded_locations,
    normalize_endpoint,
)
from headway.expconf import check_sub_path
from headway.storage import SharedFSStorageManager, StorageManager, build_storage_manager
from registry.errors import InvalidInput

RETENTION_FIELDS = ("save_experiment_best", "save_trial_best", "save_trial_latest")


def locations() -> StorageLocations:
    """The admin's locations, or the embedded default (``default``: shared_fs at the current
    ``HEADWAY_CHECKPOINT_DIR``) when ``HEADWAY_STORAGE_LOCATIONS`` is unset."""
    configured = getattr(settings, "HEADWAY_STORAGE_LOCATIONS", None)
    if configured is not None:
        return configured
    return embedded_locations(settings.HEADWAY_CHECKPOINT_DIR)


def _names(found: StorageLocations, kind: str | None = None) -> str:
    names = sorted(n for n, loc in found.locations.items() if kind in (None, loc.type))
    return ", ".join(names) or "(none)"


def _effective_endpoint(url: str | None) -> tuple[str, str, int] | None:
    # None means what boto3 would use: the server's HEADWAY_S3_ENDPOINT_URL, else AWS's own.
    url = url or os.environ.get("HEADWAY_S3_ENDPOINT_URL") or None
    return None if url is None else normalize_endpoint(url) or ("?", url, 0)


def _inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root + "/")


def _prefix_inside(prefix: str, root: str) -> bool:
    # S3 keys are compared as strings: "a//b" and "a/b" are different keys, both under "a/".
    return root == "" or prefix == root or prefix.startswith(root + "/")


def _join(*parts: str | None) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def _resolve_shared_fs(
    raw: dict[str, Any], candidates: list[StorageLocation], named: bool, field: str
) -> dict[str, Any]:
    host_path = raw.get("host_path")
    sub = raw.get("storage_path")
    if host_path is not None and (not isinstance(host_path, str) or not os.path.isabs(host_path)):
        raise InvalidInput({f"{field}.host_path": [f"must be an absolute path, got {host_path!r}"]})
    for location in candidates:
        root = str(location.host_path)
        full = posixpath.normpath(posixpath.join(host_path or root, sub or ""))
        if _inside(full, root):
            rel = posixpath.relpath(full, root)
            return {
                **location.storage_config(),
                "storage_path": None if rel == "." else rel,
            }
    where = f"location {candidates[0].name}" if named else "one of the server's storage locations"
    return _refuse(
        f"{field}.host_path" if host_path is not None else f"{field}.storage_path",
        f"{posixpath.join(host_path or '', sub or '')!r} is not inside {where}; name a location "
        "(`location:`) and a sub-folder in it (`storage_path:`) instead, or ask an administrator "
        "(HEADWAY_STORAGE_LOCATIONS)",
    )


def _resolve_s3(
    raw: dict[str, Any], candidates: list[StorageLocation], named: bool, field: str
) -> dict[str, Any]:
    bucket = raw.get("bucket")
    endpoint = _effective_endpoint(raw.get("endpoint_url"))
    region = raw.get("region")
    same_bucket = [c for c in candidates if bucket in (None, c.bucket)]
    if not same_bucket:
        where = f"location {candidates[0].name}" if named else "any s3 storage location"
        return _refuse(
            f"{field}.bucket",
            f"{bucket!r} is not the bucket of {where}; name a location (`location:`) instead, "
            "or ask an administrator (HEADWAY_STORAGE_LOCATIONS)",
        )
    same_endpoint = [
        c
        for c in same_bucket
        if raw.get("endpoint_url") in (None, "") or _effective_endpoint(c.endpoint_url) == endpoint
    ]
    if not same_endpoint:
        return _refuse(
            f"{field}.endpoint_url",
            f"{raw.get('endpoint_url')!r} is not the endpoint of the storage location of bucket "
            f"{bucket!r}; leave it out",
        )
    for location in same_endpoint:
        given = str(raw.get("prefix") or "").strip("/")
        base = given if given or (bucket is not None and not named) else location.prefix
        full = _join(base, raw.get("storage_path"))
        if not _prefix_inside(full, location.prefix):
            continue
        if region not in (None, "", location.region):
            return _refuse(
                f"{field}.region",
                f"{region!r} is not the region of location {location.name} "
                f"({location.region!r}); leave it out",
            )
        return {**location.storage_config(), "prefix": full}
    return _refuse(
        f"{field}.prefix",
        f"{raw.get('prefix')!r} is not inside the prefix of the storage location of bucket "
        f"{same_endpoint[0].bucket!r} ({same_endpoint[0].prefix!r}); use `storage_path:` for a "
        "sub-prefix",
    )


def _refuse(key: str, message: str) -> dict[str, Any]:
    raise InvalidInput({key: [message]})


def resolve_storage(
    storage: dict[str, Any] | None, *, field: str = "config.checkpoint_storage"
) -> dict[str, Any]:
    """Map a ``checkpoint_storage`` dict (as validated by ``headway.expconf`` or as stored) to
    the admin location holding it; see the module docstring.

    Returns:
        The resolved dict: ``type``, ``location`` and the location's fields (shared_fs:
        ``host_path`` (the root) and ``storage_path`` (the sub-folder or None); s3: ``bucket``,
        ``prefix`` (the location's prefix plus the sub-path), ``endpoint_url``, ``region``) and
        the retention fields that were given.

    Raises:
        InvalidInput: keyed ``<field>.<name>`` (``location``, ``type``, ``host_path``,
            ``storage_path``, ``bucket``, ``endpoint_url``, ``prefix``, ``region``), for a
            place outside every location or fields that disagree with the named one.
    """
    raw = dict(storage or {})
    found = locations()
    kind = raw.get("type")
    name = raw.get("location")
    if "storage_path" in raw:
        try:
            raw["storage_path"] = check_sub_path(raw["storage_path"])
        except (TypeError, ValueError, AttributeError) as exc:
            _refuse(f"{field}.storage_path", str(exc))
    if name:
        location = found.locations.get(name)
        if location is None:
            _refuse(f"{field}.location", f"unknown {name!r}; the locations: {_names(found)}")
        assert location is not None
        if kind not in (None, location.type):
            _refuse(f"{field}.type", f"location {name} is of type {location.type}, not {kind}")
        candidates, named = [location], True
    else:
        default = found.locations[found.default]
        has_place = raw.get("host_path") if kind == "shared_fs" else raw.get("bucket")
        if kind is None or (kind == default.type and not has_place):
            candidates, named = [default], True
        elif not has_place:
            _refuse(
                f"{field}.location",
                f"the default location ({default.name}) is {default.type}; name a {kind} "
                f"location: {_names(found, kind)}",
            )
        else:
            # The innermost location holding the place wins (locations may nest).
            candidates = sorted(
                (loc for loc in found.locations.values() if loc.type == kind),
                key=lambda loc: -len(loc.host_path or loc.prefix),
            )
            named = False
            if not candidates:
                _refuse(f"{field}.type", f"the server has no {kind} storage location")
    resolver = _resolve_shared_fs if candidates[0].type == "shared_fs" else _resolve_s3
    resolved = resolver(raw, candidates, named, field)
    resolved.update({k: raw[k] for k in RETENTION_FIELDS if k in raw})
    return resolved


def location_manager(storage: dict[str, Any]) -> StorageManager:
    """The storage manager of a stored ``checkpoint_storage`` (an experiment's or a
    checkpoint's), resolved against the locations at this moment.

    For s3, presigned URLs name the location's ``public_endpoint_url`` when it has one.
    For shared_fs the folder's real path (symbolic links followed) must also lie inside the
    location's real root: trial code can write a link into a location.

    Raises:
        InvalidInput: keyed ``checkpoint_storage.<field>`` when the place is outside every
            location (``resolve_storage``) or its real path leaves the location.
        ValueError: an invalid config (``build_storage_manager``).
    """
    resolved = resolve_storage(storage, field="checkpoint_storage")
    public = locations().locations[resolved["location"]].public_endpoint_url
    # The registry's own manager only: presigned links name the public endpoint (trial
    # processes never presign, and the stored config stays without it).
    manager = build_storage_manager(resolved | ({"public_endpoint_url": public} if public else {}))
    if isinstance(manager, SharedFSStorageManager):
        root = Path(str(resolved["host_path"])).resolve()
        if not manager.base_path.resolve().is_relative_to(root):
            _refuse(
                "checkpoint_storage.storage_path",
                f"{resolved.get('storage_path')!r} leads outside location {resolved['location']} "
                "through a symbolic link",
            )
    return manager
