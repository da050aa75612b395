"""The rules for the tar archives Headway makes and accepts, in one place (ARCHITECTURE.md, Security).

Two kinds of archive cross a trust boundary:

* **Model definitions.** ``headway experiment create`` packs a directory with
  ``pack_model_definition``; the registry checks the upload with ``check_model_definition`` before
  storing it, and workers unpack it with ``extract_model_definition``. The packer and the checker
  share the rules and the messages below, so the CLI refuses, before anything is sent, what the
  registry would refuse, in the registry's words.
* **Checkpoint tars** streamed by ``headway.storage.iter_tar_chunks``: every member name passes
  ``check_member_path``, as every checkpoint file path in storage does.

A model definition (docs/decisions.md, "Model-definition archives"):

- member paths are relative, without ``..``, backslashes or NUL characters (``check_member_path``);
- members are regular files and folders only: no symbolic or hard links, devices or FIFOs. The
  packer stores a copy of the file that a symbolic link inside the directory points to, under the
  link's name; it refuses links that leave the directory, broken links and links to folders with
  the message the registry gives for the same link;
- the archive is at most ``max_bytes`` packed (``MAX_MODEL_DEF_BYTES`` unless the registry's
  ``HEADWAY_MAX_MODEL_DEF_BYTES`` says otherwise), ``UNPACKED_FACTOR * max_bytes`` unpacked, and
  holds at most ``MAX_MEMBERS`` files and folders;
- the packer leaves out ``SKIP_NAMES`` (``.git``, ``__pycache__``), ``*.pyc`` files and anything
  that is neither a file, a folder nor a symbolic link (sockets, FIFOs, devices).

When an archive breaks several rules, the first problem found is reported. Never imports Django.
"""

from __future__ import annotations

import ast
import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_MODEL_DEF_BYTES = 32 * 1024 * 1024
"""Default limit on a packed model definition, in bytes (Determined's is 96 MiB; ours stays in
memory on both sides and is stored in the database)."""

UNPACKED_FACTOR = 4
"""A model definition may unpack to at most ``UNPACKED_FACTOR * max_bytes`` bytes of file data."""

MAX_MEMBERS = 10_000
"""Most files and folders a model definition may hold."""

SKIP_NAMES = frozenset({"__pycache__", ".git"})
"""Files and folders the packer leaves out, wherever they are in the model directory."""

SKIP_SUFFIXES = (".pyc",)
"""File name endings the packer leaves out."""

_MIB = 1024 * 1024
_MAX_LINK_HOPS = 40  # Linux's MAXSYMLINKS: more hops than this is a loop.


class UnsafeArchivePath(ValueError):
    """A path that could write outside the folder an archive is extracted into."""


class ModelDefinitionError(ValueError):
    """A model directory or archive breaks the model-definition rules; ``str()`` is the message
    both the CLI and the registry show."""


class ModelDefinitionTooLarge(ModelDefinitionError):
    """Over the packed or unpacked size limit (the registry answers 413)."""


class EntrypointNotFound(ModelDefinitionError):
    """The ``module:Class`` entrypoint's module file or class is not in the archive."""


# --- member paths ----------------------------------------------------------------------------


def check_member_path(name: str, what: str = "archive member") -> PurePosixPath:
    """Check that ``name`` (a ``/``-separated relative path) stays inside the extraction folder.

    Refused: empty paths, absolute paths, ``..`` components, backslashes (a path separator on
    Windows, where ``..\\x`` would escape) and NUL characters. ``.`` and empty segments are
    harmless and normalised away (``"./a//b"`` -> ``a/b``; ``"."`` -> ``.``, the folder itself).

    Arguments:
        name (str): the member name or relative file path.
        what (str): how messages call the path, e.g. ``"checkpoint file path"``.

    Returns:
        PurePosixPath: the normalised relative path.

    Raises:
        UnsafeArchivePath: naming the path and the rule it breaks.
    """
    if not isinstance(name, str) or not name:
        raise UnsafeArchivePath(f"{what} {name!r} is empty")
    if "\x00" in name:
        raise UnsafeArchivePath(f"{what} {name!r} contains a NUL character")
    if "\\" in name:
        raise UnsafeArchivePath(f"{what} {name!r} contains a backslash")
    if name.startswith("/"):
        raise UnsafeArchivePath(f"{what} {name!r} has an absolute path")
    if ".." in name.split("/"):
        raise UnsafeArchivePath(f"{what} {name!r} contains '..'")
    return PurePosixPath(name)


# --- messages shared by the packer and the checker ------------------------------------------


def _size(n: int) -> str:
    return f"{n // _MIB} MiB" if n % _MIB == 0 else f"{n} bytes"


def _too_large(max_bytes: int) -> ModelDefinitionTooLarge:
    return ModelDefinitionTooLarge(
        f"model definition is over the size limit ({_size(max_bytes)} packed,"
        f" {_size(UNPACKED_FACTOR * max_bytes)} unpacked);"
        " keep data sets and checkpoints out of the model directory"
    )


def _too_many() -> ModelDefinitionError:
    return ModelDefinitionError(f"model definition has more than {MAX_MEMBERS} files and folders")


def _link_outside(name: str, linkname: str) -> ModelDefinitionError:
    return ModelDefinitionError(
        f"symbolic link {name!r} -> {linkname!r} points outside the model directory;"
        " copy what it points to into the directory instead"
    )


def _link_broken(name: str, linkname: str) -> ModelDefinitionError:
    return ModelDefinitionError(
        f"symbolic link {name!r} -> {linkname!r} is broken: nothing it leads to exists"
        " (a missing target or a loop of links)"
    )


def _link_to_folder(name: str, linkname: str) -> ModelDefinitionError:
    return ModelDefinitionError(
        f"symbolic link {name!r} -> {linkname!r} points to a folder; only links to files are"
        " packed (as copies), so put the folder itself there instead"
    )


@dataclass
class _Budget:
    """Counts members and unpacked bytes against the limits, the same way on both sides."""

    max_bytes: int
    members: int = 0
    unpacked: int = 0

    def add(self, size: int) -> None:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise _too_many()
        self.unpacked += size
        if self.unpacked > UNPACKED_FACTOR * self.max_bytes:
            raise _too_large(self.max_bytes)

    def check_packed(self, packed: int) -> None:
        if packed > self.max_bytes:
            raise _too_large(self.max_bytes)


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


# --- checking (the registry) ----------------------------------------------------------------


def check_member(member: tarfile.TarInfo) -> PurePosixPath:
    """Check one member of an uploaded model definition: a safe path, a file or a folder.

    Arguments:
        member (TarInfo): the member's header.

    Returns:
        PurePosixPath: the normalised member path.

    Raises:
        ModelDefinitionError: for an unsafe path (``check_member_path``), a symbolic or hard link
            (``check_model_definition`` says more about symbolic links), or any other type than
            regular file and folder.
    """
    path = _member_path(member)
    if member.issym() or member.islnk():
        raise _link_member(member)
    return path


def _member_path(member: tarfile.TarInfo) -> PurePosixPath:
    try:
        path = check_member_path(member.name)
    except UnsafeArchivePath as exc:
        raise ModelDefinitionError(str(exc)) from None
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise ModelDefinitionError(
            f"archive member {member.name!r} is not a regular file or folder"
        )
    if not path.parts and not member.isdir():
        raise ModelDefinitionError(f"archive member {member.name!r} is a file without a name")
    return path


def _link_member(member: tarfile.TarInfo) -> ModelDefinitionError:
    if member.islnk():
        return ModelDefinitionError(
            f"archive member {member.name!r} is a hard link to {member.linkname!r}; uploads"
            " hold only regular files and folders"
        )
    return ModelDefinitionError(
        f"archive member {member.name!r} is a symbolic link; uploads hold only regular files"
        " and folders (`headway experiment create` stores a copy of the file that a link"
        " inside the model directory points to)"
    )


def check_model_definition(
    data: bytes,
    *,
    max_bytes: int = MAX_MODEL_DEF_BYTES,
    entrypoint_class: tuple[str, str] | None = None,
) -> int:
    """Check an uploaded model definition before anything is stored; return its unpacked size.

    Applies the rules of this module's docstring. For a symbolic link the message says why the
    packer would have refused it (outside the directory, broken, a folder) when it would have,
    so that the CLI and the registry name the same problem in the same words.

    Arguments:
        data (bytes): the ``tar.gz`` as uploaded.
        max_bytes (int): the packed-size limit in bytes (unpacked: ``UNPACKED_FACTOR`` times it).
        entrypoint_class ((module, class) | None): checked with ``check_entrypoint_class`` when
            the config's entrypoint is ``module:Class``.

    Returns:
        int: the total size of the archive's files in bytes.

    Raises:
        ModelDefinitionTooLarge: over the packed or unpacked limit.
        EntrypointNotFound: the entrypoint module or class is missing (or does not parse).
        ModelDefinitionError: not a gzip'd tar, an unsafe or non-regular member (``check_member``),
            or more than ``MAX_MEMBERS`` members.
    """
    budget = _Budget(max_bytes)
    budget.check_packed(len(data))
    links: dict[tuple[str, ...], tarfile.TarInfo] = {}
    files: set[tuple[str, ...]] = set()
    folders: set[tuple[str, ...]] = {()}
    first_link: tarfile.TarInfo | None = None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                path = _member_path(member)
                budget.add(member.size)
                folders.update(path.parents[i].parts for i in range(len(path.parts) - 1))
                if member.isdir():
                    folders.add(path.parts)
                elif member.isfile():
                    files.add(path.parts)
                else:
                    # Links are refused once every member is known: whether a symbolic link
                    # is broken or leads to a folder depends on members that may come later.
                    first_link = first_link or member
                    if member.issym():
                        links[path.parts] = member
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ModelDefinitionError(
            f"model definition is not a valid tar.gz archive: {exc}"
        ) from exc
    # First the links the packer would refuse too, with its message; then any other link.
    for parts, member in links.items():
        error = _symlink_error(parts, member.linkname, links, files, folders)
        if error is not None:
            raise error
    if first_link is not None:
        raise _link_member(first_link)
    if entrypoint_class is not None:
        check_entrypoint_class(data, *entrypoint_class)
    return budget.unpacked


def _symlink_error(
    parts: tuple[str, ...],
    linkname: str,
    links: dict[tuple[str, ...], tarfile.TarInfo],
    files: set[tuple[str, ...]],
    folders: set[tuple[str, ...]],
) -> ModelDefinitionError | None:
    """The packer's refusal for this link, or None when the packer would store a copy.

    Resolves ``linkname`` inside the archive as ``os.path.realpath`` resolves it on disk.
    """
    name = "/".join(parts)
    resolved: list[str] = []
    pending = [*parts[:-1], *linkname.split("/")]
    if linkname.startswith("/"):
        return _link_outside(name, linkname)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return _link_outside(name, linkname)
            resolved.pop()
            continue
        resolved.append(part)
        inner = links.get(tuple(resolved))
        if inner is not None:
            hops += 1
            if hops > _MAX_LINK_HOPS:
                return _link_broken(name, linkname)
            if inner.linkname.startswith("/"):
                return _link_outside(name, linkname)
            resolved.pop()
            pending = [*inner.linkname.split("/"), *pending]
    if tuple(resolved) in folders:
        return _link_to_folder(name, linkname)
    return None if tuple(resolved) in files else _link_broken(name, linkname)


def _defines_name(source: str, name: str) -> bool:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.ImportFrom | ast.Import):
            if any((alias.asname or alias.name.split(".")[-1]) == name for alias in node.names):
                return True
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
    return False


def check_entrypoint_class(data: bytes, module: str, class_name: str) -> None:
    """Check that ``module`` (dotted) is in the archive and defines ``class_name``.

    The module is parsed with ``ast``, never imported. A class counts as defined when the module
    declares, imports or assigns that name at top level.

    Arguments:
        data (bytes): the ``tar.gz`` model definition.
        module (str): dotted module name, looked up as ``a/b.py`` or ``a/b/__init__.py``.
        class_name (str): the name the module must define.

    Raises:
        EntrypointNotFound: the module file or the class is missing, or the module does not parse.
    """
    rel = module.replace(".", "/")
    candidates = [f"{rel}.py", f"{rel}/__init__.py"]
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = {str(PurePosixPath(m.name)): m for m in tar.getmembers() if m.isfile()}
        found = next((c for c in candidates if c in names), None)
        if found is None:
            raise EntrypointNotFound(
                f"entrypoint module {module!r} not found in the model definition "
                f"(looked for {' or '.join(candidates)})"
            )
        fh = tar.extractfile(names[found])
        source = fh.read().decode("utf-8", errors="replace") if fh else ""
    try:
        defined = _defines_name(source, class_name)
    except SyntaxError as exc:
        raise EntrypointNotFound(
            f"entrypoint module {found} has a syntax error at line {exc.lineno}: {exc.msg}"
        ) from exc
    if not defined:
        raise EntrypointNotFound(f"entrypoint class {class_name!r} is not defined in {found}")


def extract_model_definition(data: bytes, dest: str | os.PathLike[str]) -> None:
    """Unpack a model definition that ``check_model_definition`` accepted into ``dest``.

    Uses ``tarfile``'s ``"data"`` filter (PEP 706) as a second line of defence: it refuses the
    same unsafe members again.

    Raises:
        tarfile.TarError: corrupt data or a member the ``"data"`` filter refuses.
        OSError: ``dest`` cannot be written.
    """
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
