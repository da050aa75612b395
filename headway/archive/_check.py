"""Checking, and unpacking, an uploaded model definition (the registry's and workers' side)."""

from __future__ import annotations

import ast
import io
import os
import tarfile
from pathlib import PurePosixPath

from headway.archive._extract import safe_extractall
from headway.archive._rules import (
    _MAX_LINK_HOPS,
    MAX_MODEL_DEF_BYTES,
    EntrypointNotFound,
    ModelDefinitionError,
    UnsafeArchivePath,
    _Budget,
    _link_broken,
    _link_outside,
    _link_to_folder,
    check_member_path,
)
from headway.archive._scan import prescan_tar_gz

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
        ModelDefinitionError: not a gzip'd tar (or trailing data after it), an extended header
            ``prescan_tar_gz`` refuses, an unsafe or non-regular member (``check_member``), or
            more than ``MAX_MEMBERS`` members.
    """
    budget = _Budget(max_bytes)
    budget.check_packed(len(data))
    prescan_tar_gz(data, max_bytes)  # bounds what tarfile's header regexes get to see
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
        if isinstance(node, ast.ImportFrom | ast.Import) and any(
            (alias.asname or alias.name.split(".")[-1]) == name for alias in node.names
        ):
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
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

    Uses ``tarfile``'s ``"data"`` filter (PEP 706; ``safe_extractall`` on Pythons without it) as
    a second line of defence: it refuses the same unsafe members again; ``prescan_tar_gz`` runs
    first, as in ``check_model_definition``.

    Raises:
        ModelDefinitionError: what ``prescan_tar_gz`` refuses.
        tarfile.TarError: corrupt data or a member the ``"data"`` filter refuses.
        OSError: ``dest`` cannot be written.
    """
    prescan_tar_gz(data)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        safe_extractall(tar, dest)
