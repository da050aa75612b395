"""Limits, the member-path rule, errors and the messages the packer and the checker share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

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
