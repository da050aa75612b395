"""Pack a model directory into the gzipped tar that ``experiment create`` uploads."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

MAX_MODEL_DEF_BYTES = 32 * 1024 * 1024
"""Upload limit for a packed model definition (Determined's is 96 MiB; ours stays in memory)."""

SKIP_NAMES = frozenset({"__pycache__", ".git"})
SKIP_SUFFIXES = (".pyc",)
_MIB = 1024 * 1024


class ModelDefinitionError(ValueError):
    """The model directory cannot be packed: missing, a link leaving it, or too big."""


def pack_model_definition(path: Path, max_bytes: int = MAX_MODEL_DEF_BYTES) -> bytes:
    """Pack ``path`` into an in-memory ``tar.gz`` with paths relative to ``path``.

    Skips ``__pycache__``, ``.git`` and ``*.pyc``, and anything that is not a file, directory
    or symlink (sockets, FIFOs). Symlinks that stay inside the directory are kept as relative
    links; the registry extracts the archive with the same rules (ARCHITECTURE.md, Security).

    Arguments:
        path (Path): the model directory (Determined's ``model_def`` directory).
        max_bytes (int): the largest packed size accepted, in bytes.

    Returns:
        bytes: the ``tar.gz`` archive.

    Raises:
        ModelDefinitionError: ``path`` is not a directory, a symlink points outside it, a file
            cannot be read, or the archive would exceed ``max_bytes``.
    """
    root = Path(path)
    if not root.is_dir():
        raise ModelDefinitionError(f"model directory {root} does not exist or is not a directory")
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            _add_directory(tar, root, root.resolve(), "", buffer, max_bytes)
    except OSError as exc:
        raise ModelDefinitionError(f"cannot pack {exc.filename or root}: {exc.strerror}") from exc
    data = buffer.getvalue()
    if len(data) > max_bytes:
        raise _too_big(root, f"{len(data) / _MIB:.1f} MiB", max_bytes)
    return data


def _too_big(root: Path, size: str, max_bytes: int) -> ModelDefinitionError:
    return ModelDefinitionError(
        f"model directory {root} is {size} packed, over the {max_bytes / _MIB:g} MiB limit;"
        " keep data sets and checkpoints out of it"
        f" (skipped already: {', '.join(sorted(SKIP_NAMES))}, *.pyc)"
    )


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    # Owner names and ids of the uploading machine mean nothing on the workers.
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add_directory(
    tar: tarfile.TarFile,
    directory: Path,
    root_real: Path,
    prefix: str,
    buffer: io.BytesIO,
    max_bytes: int,
) -> None:
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        if entry.name in SKIP_NAMES or entry.name.endswith(SKIP_SUFFIXES):
            continue
        arcname = prefix + entry.name
        if entry.is_symlink():
            tar.addfile(_normalise(_symlink_info(Path(entry.path), arcname, root_real)))
        elif entry.is_dir(follow_symlinks=False):
            tar.add(entry.path, arcname, recursive=False, filter=_normalise)
            _add_directory(tar, Path(entry.path), root_real, arcname + "/", buffer, max_bytes)
        elif entry.is_file(follow_symlinks=False):
            tar.add(entry.path, arcname, filter=_normalise)
        # Stop early rather than compress gigabytes of data someone left in the directory.
        if buffer.tell() > max_bytes:
            raise _too_big(directory, f"more than {buffer.tell() / _MIB:.1f} MiB", max_bytes)


def _symlink_info(link: Path, arcname: str, root_real: Path) -> tarfile.TarInfo:
    target = link.resolve()
    if not target.is_relative_to(root_real):
        raise ModelDefinitionError(
            f"{arcname} is a symbolic link to {os.readlink(link)}, outside the model directory;"
            " copy what it points to into the directory instead"
        )
    info = tarfile.TarInfo(arcname)
    info.type = tarfile.SYMTYPE
    # Relative, so the link still resolves inside wherever the registry unpacks the archive.
    info.linkname = os.path.relpath(target, link.parent.resolve())
    info.mode = 0o777
    return info
