"""``safe_extractall``'s fallback for Pythons without tarfile filters (before 3.11.4, e.g.
Debian 12's 3.11.2) unpacks what the ``"data"`` filter unpacks, with the same modes, and
refuses what it refuses. Each archive is unpacked both ways here (this Python has the filter)."""

from __future__ import annotations

import io
import os
import stat
import tarfile

import pytest

from headway.archive import UnsafeTarMember, safe_extractall
from headway.archive._extract import extractall_checked


def _tar(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


def _unpack(data: bytes, dest, fallback: bool, stream: bool = False) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz" if stream else "r:gz") as tar:
        (extractall_checked if fallback else safe_extractall)(tar, dest)


def _tree(root) -> dict[str, tuple[str, int | str]]:
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[rel] = ("dir", 0)
            else:
                with open(path, "rb") as fh:
                    body = fh.read().decode()
                found[rel] = (body, stat.S_IMODE(os.stat(path).st_mode))
    return found


SAFE = _tar(
    (_member("pkg", tarfile.DIRTYPE, 0o755), None),
    (_member("pkg/model.py", mode=0o4777), b"x = 1"),  # set-uid, world-writable: both dropped
    (_member("pkg/run.sh", mode=0o700), b"echo"),
    (_member("pkg/data.bin", mode=0o000), b"d"),  # the owner may always read and write
    (_member("/abs/file.txt"), b"leading slash dropped"),
    (_member("pkg/alias.py", tarfile.SYMTYPE, link="model.py"), None),
    (_member("pkg/orig.txt"), b"o"),
    (_member("pkg/hard.txt", tarfile.LNKTYPE, link="pkg/orig.txt"), None),
)


@pytest.mark.parametrize("stream", [False, True])
def test_fallback_unpacks_what_the_data_filter_unpacks_with_its_modes(tmp_path, stream):
    _unpack(SAFE, tmp_path / "filter", fallback=False, stream=stream)
    _unpack(SAFE, tmp_path / "fallback", fallback=True, stream=stream)
    expected = _tree(tmp_path / "filter")
    assert expected["pkg/model.py"] == ("x = 1", 0o755)
    assert expected["pkg/run.sh"] == ("echo", 0o700)
    assert expected["abs/file.txt"][0] == "leading slash dropped"
    assert _tree(tmp_path / "fallback") == expected


UNSAFE = {
    "dot-dot": [(_member("../evil.txt"), b"x")],
    "absolute symlink": [(_member("etc", tarfile.SYMTYPE, link="/etc"), None)],
    "symlink out": [(_member("up", tarfile.SYMTYPE, link="../../x"), None)],
    "hard link out": [(_member("h", tarfile.LNKTYPE, link="../outside"), None)],
    "through an earlier symlink": [
        (_member("d", tarfile.SYMTYPE, link="."), None),
        (_member("d/../../escape.txt"), b"x"),
    ],
    "fifo": [(_member("pipe", tarfile.FIFOTYPE), None)],
    "device": [(_member("dev", tarfile.CHRTYPE), None)],
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_fallback_refuses_what_the_data_filter_refuses(tmp_path, case):
    data = _tar(*UNSAFE[case])
    for way in ("filter", "fallback"):
        (tmp_path / way / "dest").mkdir(parents=True)
    with pytest.raises(tarfile.FilterError):
        _unpack(data, tmp_path / "filter" / "dest", fallback=False)
    with pytest.raises(UnsafeTarMember):
        _unpack(data, tmp_path / "fallback" / "dest", fallback=True)
    # Nothing was written outside the destination folder.
    assert sorted(p.name for p in (tmp_path / "fallback").iterdir()) == ["dest"]
