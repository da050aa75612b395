"""Packing a model directory into a tar.gz (the CLI's side)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from headway.archive._rules import (
    MAX_MODEL_DEF_BYTES,
    SKIP_NAMES,
    SKIP_SUFFIXES,
    ModelDefinitionError,
    UnsafeArchivePath,
    _Budget,
    _link_broken,
    _link_outside,
    _link_to_folder,
    check_member_path,
)

# --- packing (the CLI) ----------------------------------------------------------------------


def pack_model_definition(
    path: str | os.PathLike[str], max_bytes: int = MAX_MODEL_DEF_BYTES
) -> bytes:
    """Pack the directory ``path`` into an in-memory ``tar.gz`` with paths relative to it.

    Members are the directory's folders and regular files in sorted order, with owners cleared
    and modes kept. A symbolic link to a file inside the directory is stored as a copy of that
    file under the link's name; hard-linked files are stored as separate files. Leaves out
    ``.git``, ``__pycache__``, ``*.pyc`` and sockets, FIFOs and devices. Stops as soon as a
    limit is passed instead of compressing everything first.

    Arguments:
        path (str | PathLike): the model directory (Determined's ``model_def`` directory).
        max_bytes (int): the packed-size limit in bytes (unpacked: ``UNPACKED_FACTOR`` times it).

    Returns:
        bytes: the ``tar.gz`` archive, which ``check_model_definition`` accepts with the same
        ``max_bytes``.

    Raises:
        ModelDefinitionTooLarge: over the packed or unpacked limit.
        ModelDefinitionError: ``path`` is not a directory; a symbolic link points outside it, to
            a folder or nowhere; a name is unsafe (``check_member_path``); more than
            ``MAX_MEMBERS`` entries; or a file cannot be read.
    """
    root = Path(path)
    if not root.is_dir():
        raise ModelDefinitionError(f"model directory {root} does not exist or is not a directory")
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            packer = _Packer(tar, buffer, Path(os.path.realpath(root)), _Budget(max_bytes))
            packer.add_directory(root, "")
    except OSError as exc:
        raise ModelDefinitionError(
            f"cannot pack {exc.filename or root}: {exc.strerror or exc}"
        ) from exc
    data = buffer.getvalue()
    _Budget(max_bytes).check_packed(len(data))
    return data


@dataclass
class _Packer:
    tar: tarfile.TarFile
    buffer: io.BytesIO
    root_real: Path
    budget: _Budget

    def add_directory(self, directory: Path, prefix: str) -> None:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            if entry.name in SKIP_NAMES or entry.name.endswith(SKIP_SUFFIXES):
                continue
            arcname = prefix + entry.name
            try:
                check_member_path(arcname)
            except UnsafeArchivePath as exc:
                raise ModelDefinitionError(str(exc)) from None
            source = Path(entry.path)
            if entry.is_symlink():
                source = self._link_target(source, arcname)
            info = os.stat(source)
            if stat.S_ISDIR(info.st_mode):
                self._add(arcname, tarfile.DIRTYPE, info, None)
                self.add_directory(source, arcname + "/")
            elif stat.S_ISREG(info.st_mode):
                with open(source, "rb") as fh:
                    self._add(arcname, tarfile.REGTYPE, info, fh)
            # Anything else (socket, FIFO, device) is left out: the registry would refuse it.

    def _link_target(self, link: Path, arcname: str) -> Path:
        # The same three refusals, in the same order, as ``_symlink_error`` on the registry side.
        linkname = os.readlink(link)
        target = Path(os.path.realpath(link))
        if not (target == self.root_real or target.is_relative_to(self.root_real)):
            raise _link_outside(arcname, linkname)
        try:
            mode = os.stat(target).st_mode
        except OSError:  # missing, or a loop of links
            raise _link_broken(arcname, linkname) from None
        if stat.S_ISDIR(mode):
            raise _link_to_folder(arcname, linkname)
        return target

    def _add(
        self, arcname: str, kind: bytes, st: os.stat_result, fh: io.BufferedReader | None
    ) -> None:
        info = tarfile.TarInfo(arcname)
        info.type = kind
        info.mode = stat.S_IMODE(st.st_mode)
        info.mtime = int(st.st_mtime)
        # Owner names and ids of the uploading machine mean nothing on the workers.
        info.size = st.st_size if fh is not None else 0
        self.budget.add(info.size)  # before compressing: a huge file is refused at once
        self.tar.addfile(info, fh)
        self.budget.check_packed(self.buffer.tell())
