"""Is a ``shared_fs`` storage the same file system on every host of a run? A marker file says.

A ``shared_fs`` checkpoint storage is a folder every host mounts at the same path. When it is
not (each host has a local folder of that name), checkpoints land on the chief's local disk, the
other hosts resume from nothing, and the master cannot serve them. So,
once per run start, the chief host writes a marker into the storage folder and every other host
of the run reads it before starting its ranks:

- ``write_marker``: the chief writes ``<base>/.headway-hosts/trial-<T>-run-<R>`` holding a
  value that is new for each start of the run (its rendezvous ``address:port``), before it
  publishes that value to the other hosts;
- ``marker_matches``: each other host reads the file once it has the value; a missing file
  or another value means this host does not see the chief's folder, and the run is refused
  with ``refusal`` (naming the storage and the hosts) before any rank starts.

``unreadable_message`` is the registry's side: a ``shared_fs`` checkpoint whose folder this
server cannot see is reported as such, not as deleted. Never imports Django.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

MARKER_DIR = ".headway-hosts"
_MAX_MARKER = 512  # bytes: an address and a port


def shared_fs_base(storage: Mapping[str, Any]) -> pathlib.Path | None:
    """The folder of a ``shared_fs`` ``checkpoint_storage`` (``host_path`` / ``storage_path``),
    None for other storage types or a config without ``host_path``."""
    if storage.get("type") != "shared_fs" or not storage.get("host_path"):
        return None
    base = pathlib.Path(str(storage["host_path"])).expanduser()
    if storage.get("storage_path"):
        base = base / str(storage["storage_path"])
    return base


def describe(storage: Mapping[str, Any]) -> str:
    """``shared_fs /path`` for messages."""
    return f"shared_fs {shared_fs_base(storage)}"


def _marker(base: pathlib.Path, trial_id: int, run_id: int) -> pathlib.Path:
    return base / MARKER_DIR / f"trial-{int(trial_id)}-run-{int(run_id)}"


def write_marker(base: pathlib.Path, trial_id: int, run_id: int, value: str) -> pathlib.Path:
    """Write (replace atomically) the run's marker holding ``value``; return its path.

    Raises:
        OSError: the folder cannot be created or written (the run cannot checkpoint there).
    """
    path = _marker(base, trial_id, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(value)
    os.replace(partial, path)
    return path


def marker_matches(base: pathlib.Path, trial_id: int, run_id: int, value: str) -> bool:
    """Whether this host sees the run's marker with ``value`` (False when it is missing,
    unreadable or holds another start's value)."""
    try:
        with open(_marker(base, trial_id, run_id), "rb") as marker:
            return marker.read(_MAX_MARKER).decode(errors="replace") == value
    except OSError:
        return False


def remove_marker(base: pathlib.Path, trial_id: int, run_id: int) -> None:
    """Remove the run's marker (at the run's end; a missing one is fine)."""
    with contextlib.suppress(OSError):
        _marker(base, trial_id, run_id).unlink()


def refusal(storage: Mapping[str, Any], chief: str, others: Sequence[str]) -> str:
    """The message of a run refused because ``others`` do not see the chief's folder."""
    hosts = ", ".join(others)
    return (
        f"checkpoint_storage {describe(storage)} is not the same file system on hosts "
        f"{chief} and {hosts}: host {hosts} cannot read the marker that host {chief} wrote in "
        "it. Mount one shared folder at that path on every host (and on the master), or use "
        "s3 storage."
    )


def unreadable_message(storage: Mapping[str, Any], storage_id: str) -> str | None:
    """For a ``shared_fs`` checkpoint whose storage folder this process cannot list (absent,
    or no permission): the message that says so; None for other storage types, or when the
    folder is there (a checkpoint missing from it was deleted)."""
    base = shared_fs_base(storage)
    if base is None or (base / storage_id).is_dir():
        return None
    if base.is_dir() and os.access(base, os.R_OK | os.X_OK):
        return None
    return (
        f"checkpoint {storage_id} is on {describe(storage)} which this server cannot read: "
        "that folder must be the same file system on the master as on the hosts that train."
    )
