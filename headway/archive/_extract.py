"""Unpacking a tar with ``tarfile``'s ``"data"`` filter, on every Python Headway supports.

``extractall(filter="data")`` (PEP 706) exists from Python 3.11.4 (and 3.12). Debian 12's
Python is 3.11.2, which ``requires-python = ">=3.11"`` admits, so on a Python without tarfile
filters ``safe_extractall`` checks every member itself with the data filter's rules, member by
member just before it is written (so an earlier member's symbolic link is taken into account,
as the filter does):

- the name loses its leading ``/``; a member whose real destination path leaves ``dest`` is
  refused;
- a symbolic or hard link to an absolute path, or whose target leaves ``dest``, is refused;
- devices and FIFOs are refused;
- files keep only their owner's, group's and others' read and execute bits plus the owner's
  write bit (no set-uid, set-gid, sticky or group/other write bits), and the owner may always
  read and write; owners and groups in the archive are ignored.
"""

from __future__ import annotations

import copy
import os
import tarfile
from typing import Any

__all__ = ["UnsafeTarMember", "safe_extractall"]


class UnsafeTarMember(tarfile.TarError):
    """A member the ``"data"`` filter would refuse (raised only where ``tarfile`` has no
    filters; there ``tarfile``'s own ``FilterError`` subclasses are raised)."""


def safe_extractall(tar: tarfile.TarFile, dest: str | os.PathLike[str]) -> None:
    """``tar.extractall(dest, filter="data")``, or its equivalent on a Python without tarfile
    filters (see the module docstring). Works on stream archives (``mode="r|"``) too.

    Raises:
        tarfile.TarError: a corrupt archive or a member the data filter refuses
            (``tarfile.FilterError`` or ``UnsafeTarMember``).
        OSError: ``dest`` cannot be written.
    """
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
    else:  # pragma: no cover - Python < 3.11.4 only; tests call the fallback directly
        extractall_checked(tar, dest)


def extractall_checked(tar: tarfile.TarFile, dest: str | os.PathLike[str]) -> None:
    """The fallback of ``safe_extractall``: each member checked with the data filter's rules
    (``checked_member``), then extracted without ``tarfile``'s own attribute handling, and
    its mode set as the data filter would."""
    root = os.path.realpath(dest)
    # Where filters exist (the tests), say that members are already checked: no warning.
    trusted: dict[str, Any] = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
    for member in tar:
        safe, mode = checked_member(member, root)
        tar.extract(safe, root, set_attrs=False, **trusted)
        if mode is not None:
            os.chmod(os.path.join(root, safe.name), mode)


def checked_member(member: tarfile.TarInfo, root: str) -> tuple[tarfile.TarInfo, int | None]:
    """``member`` as the data filter would let it through, and the mode to give the written
    file (None: the default, for folders and links).

    Arguments:
        member (TarInfo): the next member of the archive.
        root (str): the real path of the destination folder.

    Raises:
        UnsafeTarMember: naming the member and why.
    """
    name = member.name.lstrip("/" + os.sep)
    if os.path.isabs(name):
        raise UnsafeTarMember(f"member {member.name!r} has an absolute path")
    target = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, target]) != root:
        raise UnsafeTarMember(f"member {member.name!r} would be written outside the folder")
    if member.ischr() or member.isblk() or member.isfifo():
        raise UnsafeTarMember(f"member {member.name!r} is a device or a FIFO")
    if (member.issym() or member.islnk()) and os.path.isabs(member.linkname):
        raise UnsafeTarMember(f"link {member.name!r} points to an absolute path")
    if member.issym():
        linked = os.path.join(root, os.path.dirname(name), member.linkname)
    elif member.islnk():
        linked = os.path.join(root, member.linkname)
    else:
        linked = None
    if linked is not None:
        real = os.path.realpath(linked)
        if os.path.commonpath([root, real]) != root:
            raise UnsafeTarMember(f"link {member.name!r} points outside the folder")
    mode: int | None = None
    if member.isreg() or member.islnk():
        mode = member.mode
        if not mode & 0o100:
            mode &= ~0o111  # executable by nobody unless by its owner, as the data filter
        mode = (mode | 0o600) & 0o755
    safe = copy.copy(member)
    safe.name = name
    return safe, mode
