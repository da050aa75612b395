"""Checks on uploaded model definitions: untrusted tar.gz archives of the user's code.

``validate_model_definition`` rejects, before anything is stored: content that is not a gzip'd
tar, absolute member names, ``..`` components, links and device files, more than ``max_bytes``
compressed or ``max_bytes * 4`` unpacked, and (for ``module:Class`` entrypoints) a module file or
class that is not there. The class check parses the module with ``ast`` and never imports it.
"""

from __future__ import annotations

import ast
import io
import tarfile
from pathlib import PurePosixPath

MAX_MEMBERS = 10_000


class ModelDefinitionError(ValueError):
    """The archive is unsafe or does not contain the entrypoint; ``field`` names the input."""

    def __init__(self, message: str, field: str = "model_definition") -> None:
        super().__init__(message)
        self.field = field


def _check_member(member: tarfile.TarInfo) -> str:
    name = member.name
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith("/"):
        raise ModelDefinitionError(f"archive member {name!r} has an absolute path")
    if ".." in path.parts:
        raise ModelDefinitionError(f"archive member {name!r} contains '..'")
    if member.issym() or member.islnk():
        raise ModelDefinitionError(f"archive member {name!r} is a link; links are not allowed")
    if not (member.isfile() or member.isdir()):
        raise ModelDefinitionError(f"archive member {name!r} is not a regular file or folder")
    return str(path)


def read_members(data: bytes, *, max_bytes: int) -> dict[str, tarfile.TarInfo]:
    """Return the archive's members by normalised name after the safety checks above.

    Raises:
        ModelDefinitionError: on any unsafe member, corrupt data or oversize content.
    """
    if len(data) > max_bytes:
        raise ModelDefinitionError(
            f"model definition is {len(data)} bytes packed; the limit is {max_bytes} bytes"
        )
    members: dict[str, tarfile.TarInfo] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                name = _check_member(member)
                total += member.size
                if total > max_bytes * 4:
                    raise ModelDefinitionError(
                        f"model definition unpacks to more than {max_bytes * 4} bytes"
                    )
                if len(members) >= MAX_MEMBERS:
                    raise ModelDefinitionError(f"model definition has over {MAX_MEMBERS} files")
                members[name] = member
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ModelDefinitionError(
            f"model definition is not a valid tar.gz archive: {exc}"
        ) from exc
    return members


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
    """Check that ``module`` (dotted) exists in the archive and defines ``class_name``.

    Raises:
        ModelDefinitionError: with ``field="entrypoint"`` when the module file or class is missing
            or the module does not parse.
    """
    rel = module.replace(".", "/")
    candidates = [f"{rel}.py", f"{rel}/__init__.py"]
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = {str(PurePosixPath(m.name)): m for m in tar.getmembers() if m.isfile()}
        found = next((c for c in candidates if c in names), None)
        if found is None:
            raise ModelDefinitionError(
                f"entrypoint module {module!r} not found in the model definition "
                f"(looked for {' or '.join(candidates)})",
                field="entrypoint",
            )
        fh = tar.extractfile(names[found])
        source = fh.read().decode("utf-8", errors="replace") if fh else ""
    try:
        defined = _defines_name(source, class_name)
    except SyntaxError as exc:
        raise ModelDefinitionError(
            f"entrypoint module {found} has a syntax error at line {exc.lineno}: {exc.msg}",
            field="entrypoint",
        ) from exc
    if not defined:
        raise ModelDefinitionError(
            f"entrypoint class {class_name!r} is not defined in {found}", field="entrypoint"
        )


def validate_model_definition(
    data: bytes, *, max_bytes: int, entrypoint_class: tuple[str, str] | None
) -> int:
    """Validate an uploaded archive; return its unpacked size in bytes.

    Arguments:
        data (bytes): the tar.gz as uploaded.
        max_bytes (int): limit on the packed size (the unpacked limit is four times this).
        entrypoint_class ((module, class) | None): checked when the entrypoint is ``module:Class``.
    """
    members = read_members(data, max_bytes=max_bytes)
    if entrypoint_class is not None:
        check_entrypoint_class(data, *entrypoint_class)
    return sum(m.size for m in members.values())


def extract_model_definition(data: bytes, dest: str) -> None:
    """Unpack a (previously validated) archive into ``dest`` with tarfile's ``data`` filter."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
