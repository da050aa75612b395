"""Reading a registered checkpoint's files straight from its storage, not through the registry.

Determined's ``Checkpoint.download(mode=DownloadMode.DIRECT)`` / ``det checkpoint download
--mode direct``: on a machine that mounts the checkpoint's shared file system (a cluster's login
node, a host of the cluster), its files are copied in the kernel (``sendfile``) instead of being
streamed by the registry's web server. ``AUTO`` (the default) tries this first and falls back to
the registry. Only ``shared_fs`` storage is read directly: S3 would need this machine's own
credentials for the bucket, which a user downloading through the registry does not need.
"""

from __future__ import annotations

import enum
import errno
import os
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from headway.storage._build import build_storage_manager
from headway.storage._shared_fs import SharedFSStorageManager


class DownloadMode(enum.Enum):
    """Where a checkpoint download reads from (Determined's ``client.DownloadMode``).

    Attributes:
        DIRECT: from checkpoint storage itself (``shared_fs`` mounted here); an error otherwise.
        MASTER: through the registry's ``checkpoints/<uuid>/download`` (any storage).
        AUTO: DIRECT when this machine can read the storage, else MASTER.
    """

    DIRECT = "direct"
    MASTER = "master"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


class DirectReadUnavailable(Exception):
    """This machine cannot read the checkpoint from its storage; the message says why."""


def direct_reader(checkpoint: Mapping[str, Any]) -> SharedFSStorageManager:
    """The storage manager that reads ``checkpoint``'s files here, checked to hold them.

    Arguments:
        checkpoint: the registry's checkpoint (``uuid``, ``state``, ``storage``: the experiment's
            ``checkpoint_storage`` as the registry resolved it).

    Raises:
        DirectReadUnavailable: the checkpoint is not COMPLETED, its storage is not ``shared_fs``
            or its config is incomplete, or its folder is not on this machine.
    """
    uuid = str(checkpoint.get("uuid"))
    if checkpoint.get("state") not in (None, "COMPLETED"):
        raise DirectReadUnavailable(f"checkpoint {uuid} is {checkpoint.get('state')}")
    storage = checkpoint.get("storage") or {}
    kind = storage.get("type") if isinstance(storage, Mapping) else None
    if kind != "shared_fs":
        raise DirectReadUnavailable(
            f"checkpoint {uuid} is in {kind or 'unknown'} storage; only shared_fs is read "
            "directly (the registry serves every storage)"
        )
    try:
        manager = build_storage_manager(dict(storage))
    except ValueError as exc:
        raise DirectReadUnavailable(str(exc)) from None
    assert isinstance(manager, SharedFSStorageManager)
    if not manager.exists(uuid):
        raise DirectReadUnavailable(
            f"checkpoint {uuid} is not under {manager.base_path} on this machine "
            "(the shared file system is not mounted here)"
        )
    return manager


def copy_direct(
    manager: SharedFSStorageManager,
    uuid: str,
    rel: str,
    target: pathlib.Path,
    on_bytes: Callable[[int], object] = lambda n: None,
) -> None:
    """Append file ``rel`` of checkpoint ``uuid`` to ``target`` from ``target``'s current size on
    (a resumed copy), in the kernel where it can (``sendfile``); ``on_bytes(n)`` after each piece.

    Raises:
        DirectReadUnavailable: the file cannot be read from storage (missing, unreadable, a
            link leaving the checkpoint).
        OSError: ``target`` cannot be written.
    """
    have = target.stat().st_size if target.exists() else 0
    try:
        source = manager.open_file(uuid, rel, start=have)
    except (OSError, ValueError) as exc:
        raise DirectReadUnavailable(f"cannot read {rel} of checkpoint {uuid}: {exc}") from None
    with source, open(target, "ab" if have else "wb") as out:
        _copy_rest(source, out, on_bytes)


def _copy_rest(source: Any, out: Any, on_bytes: Callable[[int], object]) -> None:
    # Pieces, not one call: the progress bar moves, and sendfile stops at 2 GiB a call anyway.
    piece = 64 << 20
    try:
        while n := os.sendfile(out.fileno(), source.fileno(), None, piece):
            on_bytes(n)
        return
    except OSError as exc:  # file-to-file sendfile is Linux's; elsewhere read and write
        if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise
    except AttributeError:  # no os.sendfile at all (Windows)
        pass
    while chunk := source.read(1 << 20):
        out.write(chunk)
        on_bytes(len(chunk))
