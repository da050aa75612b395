"""``headway checkpoint download``: a checkpoint's files, resumable, with a progress bar.

Default: every file of the registry's ``resources`` is fetched on its own into ``DIR``: copied
from the checkpoint's shared file system when this machine mounts it (``--mode auto``, the
default, as Determined's ``det checkpoint download``; ``--mode direct`` insists on it), else
through the registry (``checkpoints/<uuid>/download?path=FILE``; ``--mode master`` always). A
file already there with the registered size is skipped, a shorter one is resumed (an HTTP
``Range`` request, or a copy from its size on), and every file's size is checked against
``resources`` at the end. ``--format tar|tgz|zip`` instead saves the archive the server builds on
the fly as one file (not resumable: the archive is generated per request).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from headway.cli._common import CLIError, make_api
from headway.client import APIError, RegistryAPI, wire

CHUNK_BYTES = 1 << 20
# Attempts per file after a dropped connection, each resuming where the last one stopped.
RESUME_ATTEMPTS = 3
ARCHIVE_EXTENSIONS = {"tar": "tar", "tgz": "tar.gz", "zip": "zip"}
# headway.storage.DownloadMode's values (not imported here: the storage package takes ~15 ms
# to load, which `--mode master` does not need).
MODES = ("auto", "direct", "master")

if TYPE_CHECKING:
    from tqdm import tqdm


def add_parser(ckpt_cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``checkpoint download`` under the ``checkpoint`` subcommands."""
    download = ckpt_cmds.add_parser(
        "download", help="download a checkpoint's files (resumable) or one archive of them"
    )
    download.add_argument("uuid", metavar="UUID")
    download.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        help="target directory (default: checkpoints/UUID); with --format, the archive file "
        "(default: UUID.tar, UUID.tar.gz or UUID.zip)",
    )
    download.add_argument(
        "--format",
        choices=sorted(ARCHIVE_EXTENSIONS),
        help="save the archive the server streams instead of the files (not resumable)",
    )
    download.add_argument(
        "--mode",
        choices=MODES,
        default="auto",
        help="where to read the files: 'direct' from the checkpoint's shared file system "
        "mounted here, 'master' through the registry, 'auto' (default) direct when it can",
    )
    download.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: only when stderr is a terminal)",
    )
    download.set_defaults(func=cmd_download)


def cmd_download(args: argparse.Namespace) -> int:
    """Download checkpoint ``args.uuid``; print the directory (or archive file) written.

    Raises:
        CLIError: naming the file, for an unsafe path in the registry's listing, a file whose
            size differs from the registry's ``resources``, a file missing from storage, a
            connection lost more than ``RESUME_ATTEMPTS`` times (run again to resume), ``--mode
            direct`` where the storage cannot be read here (saying why) or with ``--format``.
    """
    api = make_api(args)
    disable = None if args.progress is None else not args.progress  # None: tqdm checks isatty
    if args.format and args.mode == "direct":
        raise CLIError("--mode direct copies the files; --format asks the registry for an archive")
    if args.format:
        target = Path(args.output or f"{args.uuid}.{ARCHIVE_EXTENSIONS[args.format]}")
        _download_archive(api, args.uuid, args.format, target, disable)
        print(target.resolve())
        return 0
    dest = Path(args.output or Path("checkpoints") / args.uuid)
    checkpoint = api.checkpoint_get(args.uuid)
    reader = None if args.mode == "master" else _direct_reader(checkpoint, args.mode)
    plan = {
        _local_path(dest, args.uuid, rel): (rel, size) for rel, size in checkpoint.resources.items()
    }
    present = {path: _size_on_disk(path) for path in plan}
    done = sum(have for path, have in present.items() if have <= plan[path][1])
    total = sum(size for _, size in plan.values())
    try:
        with _bar(total, done, args.uuid, disable) as bar:
            for path, (rel, size) in sorted(plan.items(), key=lambda item: item[1][0]):
                if reader is not None and _copied_direct(reader, args, rel, size, path, bar):
                    continue
                _download_file(api, args.uuid, rel, size, path, bar)
    except OSError as exc:
        raise CLIError(f"cannot write checkpoint into {dest}: {exc}") from None
    for path, (rel, size) in plan.items():
        if _size_on_disk(path) != size:  # a file changed under us since it was written
            raise CLIError(f"checkpoint {args.uuid}: {rel} is not {size} bytes as registered")
    print(dest.resolve())
    return 0


def _direct_reader(checkpoint: wire.CheckpointRow, mode: str) -> Any:
    """The storage manager reading ``checkpoint`` here, or None (``auto``: go through the
    registry instead)."""
    from headway.storage import DirectReadUnavailable, direct_reader

    try:
        return direct_reader(
            {"uuid": checkpoint.uuid, "state": checkpoint.state, "storage": checkpoint.storage}
        )
    except DirectReadUnavailable as exc:
        if mode == "direct":
            raise CLIError(f"--mode direct: {exc}") from None
        return None


def _copied_direct(
    reader: Any, args: argparse.Namespace, rel: str, size: int, path: Path, bar: tqdm[Any]
) -> bool:
    """Copy ``rel`` from storage into ``path`` (resuming); False when storage cannot give it and
    ``--mode auto`` may ask the registry instead."""
    from headway.storage import DirectReadUnavailable, copy_direct

    have = _size_on_disk(path)
    if have > size:  # not a prefix of this file: start over
        path.unlink()
    elif have == size and path.exists():
        return True
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        copy_direct(reader, args.uuid, rel, path, bar.update)
    except DirectReadUnavailable as exc:
        if args.mode == "direct":
            raise CLIError(f"--mode direct: {exc}") from None
        return False
    return True


def _local_path(dest: Path, uuid: str, rel: str) -> Path:
    from headway.archive import UnsafeArchivePath, check_member_path

    try:
        return dest / check_member_path(rel, what="checkpoint file path")
    except UnsafeArchivePath as exc:
        raise CLIError(f"checkpoint {uuid}: refusing unsafe file path: {exc}") from None


def _size_on_disk(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _bar(total: int | None, initial: int, uuid: str, disable: bool | None) -> tqdm[Any]:
    from tqdm import tqdm  # ~30 ms: loaded by the command that draws a bar, not by every command

    return tqdm(
        total=total,
        initial=initial,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=uuid[:8],
        file=sys.stderr,
        disable=disable,
        leave=True,
    )


def _download_file(
    api: RegistryAPI, uuid: str, rel: str, size: int, path: Path, bar: tqdm[Any]
) -> None:
    """Bring ``path`` to the ``size`` bytes of file ``rel``, resuming what is already there."""
    have = _size_on_disk(path)
    if have > size:  # not a prefix of this file: start over
        path.unlink()
        have = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(RESUME_ATTEMPTS + 1):
        if have == size and path.exists():
            break  # already complete (or resumed to completion)
        try:
            response = api.checkpoint_download(uuid, path=rel, offset=have)
        except APIError as exc:
            raise CLIError(f"checkpoint {uuid}: cannot download {rel}: {exc}") from None
        try:
            if have and response.status_code != 206:  # the server sent the whole file
                bar.update(-have)
                have = 0
            with open(path, "ab" if have else "wb") as fh:
                for chunk in response.iter_content(CHUNK_BYTES):
                    fh.write(chunk)
                    have += len(chunk)
                    bar.update(len(chunk))
            break  # the server sent all it had; the size is checked below
        except requests.RequestException as exc:
            have = _size_on_disk(path)
            if attempt == RESUME_ATTEMPTS:
                raise CLIError(
                    f"checkpoint {uuid}: download of {rel} interrupted at {have} of {size} "
                    f"bytes ({exc}); run the command again to resume"
                ) from None
        finally:
            response.close()
    if have != size:
        raise CLIError(
            f"checkpoint {uuid}: {rel} has {have} bytes, but the registry's resources say {size}"
        )


def _download_archive(
    api: RegistryAPI, uuid: str, kind: str, target: Path, disable: bool | None
) -> None:
    """Stream the server's ``kind`` archive into ``target`` (via ``target.part``)."""
    partial = target.with_name(target.name + ".part")
    try:
        response = api.checkpoint_download(uuid, format=kind)
    except APIError as exc:
        raise CLIError(f"checkpoint {uuid}: {exc}") from None
    length = response.headers.get("Content-Length")
    total = int(length) if length else None
    written = 0
    try:
        with _bar(total, 0, uuid, disable) as bar, open(partial, "wb") as fh:
            for chunk in response.iter_content(CHUNK_BYTES):
                fh.write(chunk)
                written += len(chunk)
                bar.update(len(chunk))
        if total is not None and written != total:
            raise CLIError(f"checkpoint {uuid}: archive has {written} of {total} bytes")
        os.replace(partial, target)
    except requests.RequestException as exc:
        raise CLIError(f"checkpoint {uuid}: download interrupted: {exc}") from None
    except OSError as exc:
        raise CLIError(f"cannot write {target}: {exc}") from None
    finally:
        response.close()
        partial.unlink(missing_ok=True)
