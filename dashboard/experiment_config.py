"""The experiment's config (as submitted and with defaults) and its model definition's files.

The model definition is the ``tar.gz`` stored at submission, already checked by
``headway.archive.check_model_definition`` (size, member count, safe paths); the viewer lists its
regular files and shows one as text, capped at ``MAX_VIEW_BYTES``.
"""

from __future__ import annotations

import dataclasses
import io
import tarfile

import yaml

from headway.archive import UnsafeArchivePath, check_member_path
from registry.models import Experiment

MAX_VIEW_BYTES = 512 * 1024


def config_views(experiment: Experiment) -> dict[str, str]:
    """``{"submitted": YAML text as uploaded (may be empty), "effective": YAML with defaults}``."""
    effective = yaml.safe_dump(experiment.config, sort_keys=False, default_flow_style=False)
    return {"submitted": experiment.original_config, "effective": effective}


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """One regular file of a model definition: relative POSIX path and size in bytes."""

    path: str
    size: int


@dataclasses.dataclass(frozen=True)
class FileView:
    """One file's text for the viewer; ``text`` is None for a binary file."""

    path: str
    size: int
    text: str | None
    truncated: bool


def _model_definition(experiment_id: int) -> bytes:
    row = Experiment.objects.only("id", "model_definition").get(id=experiment_id)
    return bytes(row.model_definition or b"")


def model_files(experiment_id: int) -> list[ModelFile]:
    """The regular files of the experiment's model definition, sorted by path (1 query).

    An empty or unreadable archive (experiments created without one) gives an empty list.
    """
    data = _model_definition(experiment_id)
    if not data:
        return []
    files = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                if member.isfile():
                    files.append(ModelFile(path=member.name.removeprefix("./"), size=member.size))
    except (tarfile.TarError, EOFError, OSError):
        return []
    return sorted(files, key=lambda f: f.path)


def model_file(experiment_id: int, path: str) -> FileView | None:
    """One file of the model definition as text (first ``MAX_VIEW_BYTES``), or None if absent.

    Raises:
        ValueError: when ``path`` is not a safe relative path (absolute, ``..``, NUL).
    """
    try:
        wanted = str(check_member_path(path, what="file path"))
    except UnsafeArchivePath as exc:
        raise ValueError(str(exc)) from None
    data = _model_definition(experiment_id)
    if not data:
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar:
                if member.isfile() and member.name.removeprefix("./") == wanted:
                    handle = tar.extractfile(member)
                    raw = handle.read(MAX_VIEW_BYTES + 1) if handle else b""
                    return FileView(
                        path=wanted,
                        size=member.size,
                        text=_as_text(raw[:MAX_VIEW_BYTES]),
                        truncated=len(raw) > MAX_VIEW_BYTES,
                    )
    except (tarfile.TarError, EOFError, OSError):
        return None
    return None


def _as_text(raw: bytes) -> str | None:
    """UTF-8 text, or None for binary content (a NUL byte or invalid UTF-8)."""
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the size cap is still text.
        if exc.start >= len(raw) - 3:
            return raw[: exc.start].decode("utf-8")
        return None
