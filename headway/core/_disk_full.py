"""A checkpoint that did not fit: a clear error instead of torch's obscure one.

``torch.save`` to a full disk raises ``RuntimeError('[enforce fail at inline_container.cc:672]
. unexpected pos 576 vs 534')``; plain writes raise ``OSError(ENOSPC)``. ``CheckpointContext.
store_path`` runs its block under ``disk_full_is_reported(path)``: when the block (or the
metadata written after it) fails with ENOSPC / EDQUOT anywhere in the exception's chain, or
fails with anything while the checkpoint's filesystem has less than ``LOW_SPACE_BYTES`` left,
``CheckpointStorageFull`` is raised from it, naming the checkpoint folder and the free space
(read before the partial checkpoint is deleted). The trial then fails like any error: nothing is
registered, the partial files are removed, and the run exits non-zero (docs/checkpoints.md).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
from collections.abc import Iterator

LOW_SPACE_BYTES = 16 * 1024 * 1024  # "the disk is full" below this much free space
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class CheckpointStorageFull(OSError):
    """A checkpoint could not be written: its storage has no space (or quota) left.

    Attributes:
        path (pathlib.Path): the checkpoint folder being written.
        free_bytes (int | None): space left for unprivileged writers there, None if unknown.
    """

    def __init__(self, path: pathlib.Path, free_bytes: int | None, cause: BaseException) -> None:
        free = "unknown" if free_bytes is None else _human(free_bytes)
        super().__init__(
            errno.ENOSPC,
            f"checkpoint storage is full: writing {path} failed with {free} free on its "
            f"filesystem ({type(cause).__name__}: {cause}). Free space there (delete old "
            "checkpoints, lower save_trial_latest / save_experiment_best) or use other "
            "checkpoint_storage.",
        )
        self.path = path
        self.free_bytes = free_bytes


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # unreachable


def free_bytes(path: pathlib.Path) -> int | None:
    """Bytes an unprivileged process may still write on ``path``'s filesystem, or None."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _is_disk_full(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL_ERRNOS:
            return True
        current = current.__cause__ or current.__context__
    return False


@contextlib.contextmanager
def disk_full_is_reported(path: pathlib.Path) -> Iterator[None]:
    """Re-raise a failure of the block as ``CheckpointStorageFull`` when the disk is full."""
    try:
        yield
    except CheckpointStorageFull:
        raise
    except Exception as exc:
        free = free_bytes(path)
        if _is_disk_full(exc) or (free is not None and free < LOW_SPACE_BYTES):
            raise CheckpointStorageFull(path, free, exc) from exc
        raise
