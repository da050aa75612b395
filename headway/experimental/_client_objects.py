"""The objects of ``headway.experimental.client`` that wrap REST answers: ``Checkpoint``,
``ModelVersion`` and ``Model`` (Determined's ``client`` classes of the same names). Each holds
the ``RegistryAPI`` it was read with; the module-level functions that log in and fetch them
are in ``headway.experimental.client``, which re-exports these.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import tarfile
from typing import Any

from headway.archive import safe_extractall
from headway.client import NotFoundError, RegistryAPI, wire
from headway.storage import DirectReadUnavailable, DownloadMode, copy_direct, direct_reader


@dataclasses.dataclass
class Checkpoint:
    """A registered checkpoint (Determined's ``client.Checkpoint``).

    Attributes:
        uuid (str), trial_id (int), experiment_id (int), steps_completed (int),
        state (str), metadata (dict), resources (dict: relative path -> bytes),
        storage (dict: the experiment's ``checkpoint_storage`` as the registry resolved it).
    """

    uuid: str
    trial_id: int | None
    experiment_id: int | None
    steps_completed: int | None
    state: str | None
    metadata: dict[str, Any]
    resources: dict[str, int]
    storage: dict[str, Any]
    _api: RegistryAPI = dataclasses.field(repr=False)

    @classmethod
    def _from_row(cls, row: wire.CheckpointRow, api: RegistryAPI) -> Checkpoint:
        return cls(
            uuid=row.uuid,
            trial_id=row.trial_id,
            experiment_id=row.experiment_id,
            steps_completed=row.steps_completed,
            state=row.state,
            metadata=dict(row.metadata),
            resources=dict(row.resources),
            storage=dict(row.storage),
            _api=api,
        )

    def download(
        self, path: str | os.PathLike[str] | None = None, mode: DownloadMode = DownloadMode.AUTO
    ) -> str:
        """Download the checkpoint's files into ``path`` (default ``checkpoints/<uuid>``);
        return the directory (Determined's ``Checkpoint.download``).

        ``mode``: ``DIRECT`` copies the files from the checkpoint's shared file system mounted
        on this machine, ``MASTER`` streams them through the registry as a tar, ``AUTO`` (the
        default) is DIRECT when this machine can read the storage, else MASTER. Extraction uses
        ``tarfile``'s ``"data"`` filter and a direct copy only the registered file names, so
        neither can write outside the directory.

        Raises:
            ValueError: ``mode`` is not a ``DownloadMode``, ``DIRECT`` where this machine
                cannot read the checkpoint's storage (saying why), or a file copied from
                storage whose size is not the registered one.
            headway.client.APIError: the registry refused (e.g. 410: files gone from storage).
            tarfile.TarError: unsafe or corrupt archive.
        """
        if not isinstance(mode, DownloadMode):
            raise ValueError(f"mode must be a DownloadMode (direct, master, auto), got {mode!r}")
        dest = pathlib.Path(path) if path is not None else pathlib.Path("checkpoints", self.uuid)
        dest.mkdir(parents=True, exist_ok=True)
        if mode is not DownloadMode.MASTER and self._copied_direct(dest, mode):
            return str(dest)
        response = self._api.checkpoint_download(self.uuid)
        try:
            response.raw.decode_content = True
            with tarfile.open(fileobj=response.raw, mode="r|") as archive:
                safe_extractall(archive, dest)
        finally:
            response.close()
        return str(dest)

    def _copied_direct(self, dest: pathlib.Path, mode: DownloadMode) -> bool:
        """Copy every registered file from storage into ``dest``; False when storage cannot be
        read here and ``mode`` is AUTO."""
        from headway.archive import check_member_path

        try:
            reader = direct_reader(
                {"uuid": self.uuid, "state": self.state, "storage": self.storage}
            )
            for rel, size in sorted(self.resources.items()):
                target = dest / check_member_path(rel, what="checkpoint file path")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                copy_direct(reader, self.uuid, rel, target)
                if target.stat().st_size != size:
                    raise ValueError(
                        f"checkpoint {self.uuid}: {rel} in storage is "
                        f"{target.stat().st_size} bytes, the registry's resources say {size}"
                    )
        except DirectReadUnavailable as exc:
            if mode is DownloadMode.DIRECT:
                raise ValueError(f"DownloadMode.DIRECT: {exc}") from None
            return False
        return True

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Add keys to the checkpoint's metadata; keys already there are replaced (Determined's
        ``Checkpoint.add_metadata``). ``self.metadata`` becomes the registry's merged copy.

        As in Determined, ``metadata.json`` in checkpoint storage is not changed: the registry
        (``get_checkpoint(uuid).metadata``, ``core_context.checkpoint.get_metadata`` on the
        cluster)
        has the merged metadata. Only the experiment's owner (or the trial's own run) may add.

        Raises:
            TypeError: when ``metadata`` is not a dict.
            headway.client.APIError: the registry refused (400 naming the field, e.g. a changed
                ``steps_completed`` or NaN; 403 not the owner; 404 unknown checkpoint).
        """
        if not isinstance(metadata, dict):
            raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
        self.metadata = self._api.checkpoint_metadata_add(self.uuid, metadata).metadata

    def download_file(self, relpath: str, dest: str | os.PathLike[str]) -> None:
        """Download one file of the checkpoint (a key of ``resources``) to ``dest``."""
        response = self._api.checkpoint_download(self.uuid, path=relpath)
        try:
            pathlib.Path(dest).parent.mkdir(parents=True, exist_ok=True)
            response.raw.decode_content = True
            with open(dest, "wb") as fh:
                shutil.copyfileobj(response.raw, fh)
        finally:
            response.close()


@dataclasses.dataclass
class ModelVersion:
    """Version ``model_version`` (1, 2, ...) of a registered model (Determined's
    ``client.ModelVersion``): ``checkpoint`` is the ``Checkpoint`` it holds.

    Attributes:
        model_name (str), model_version (int), checkpoint (Checkpoint), name (str),
        comment (str), labels (list[str]), metadata (dict).
    """

    model_name: str
    model_version: int
    checkpoint: Checkpoint
    name: str
    comment: str
    labels: list[str]
    metadata: dict[str, Any]

    @classmethod
    def _from_json(cls, data: dict[str, Any], api: RegistryAPI) -> ModelVersion:
        return cls(
            model_name=str(data["model"]),
            model_version=int(data["version"]),
            # A version's checkpoint: the identifying fields of a checkpoint row and a few more.
            checkpoint=Checkpoint._from_row(
                wire.CheckpointRow.model_validate(data["checkpoint"]), api
            ),
            name=data.get("name") or "",
            comment=data.get("comment") or "",
            labels=list(data.get("labels") or []),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclasses.dataclass
class Model:
    """A registered model (Determined's ``client.Model``): ``name``, ``description``,
    ``labels``, ``metadata``, ``archived``; versions via ``register_version`` /
    ``get_version`` / ``get_versions`` / ``get_version_by_alias``; aliases via ``set_alias`` /
    ``delete_alias``."""

    name: str
    description: str
    labels: list[str]
    metadata: dict[str, Any]
    archived: bool
    _api: RegistryAPI = dataclasses.field(repr=False)

    @classmethod
    def _from_json(cls, data: dict[str, Any], api: RegistryAPI) -> Model:
        return cls(
            name=str(data["name"]),
            description=data.get("description") or "",
            labels=list(data.get("labels") or []),
            metadata=dict(data.get("metadata") or {}),
            archived=bool(data.get("archived")),
            _api=api,
        )

    def register_version(self, checkpoint_uuid: str) -> ModelVersion:
        """Register a ``COMPLETED`` checkpoint as this model's next version; return it.

        Raises:
            headway.client.BadRequestError: unknown, deleted or malformed ``checkpoint_uuid``.
            headway.client.UnauthenticatedError: not the model's owner (nor an admin).
            headway.client.ConflictError: the model is archived.
        """
        data = self._api.model_version_create(self.name, {"checkpoint_uuid": str(checkpoint_uuid)})
        return ModelVersion._from_json(data, self._api)

    def get_version(self, version: int = -1) -> ModelVersion:
        """Version ``version``; ``-1`` (the default) is the latest.

        Raises:
            headway.client.NotFoundError: no such version (or, for ``-1``, none at all).
        """
        if version == -1:
            versions = self._api.model_versions(self.name, limit=1)
            if not versions:
                raise NotFoundError(f"model {self.name} has no versions", 404, None)
            return ModelVersion._from_json(versions[0], self._api)
        data = self._api.model_version_get(self.name, int(version))
        return ModelVersion._from_json(data, self._api)

    def get_versions(self) -> list[ModelVersion]:
        """Every version, newest (highest number) first."""
        items = self._api.model_versions(self.name)
        return [ModelVersion._from_json(v, self._api) for v in items]

    def get_version_by_alias(self, alias: str) -> ModelVersion:
        """The version ``alias`` points at (MLflow's ``get_model_version_by_alias``; ``latest``:
        the newest).

        Raises:
            headway.client.NotFoundError: the model has no such alias.
        """
        data = self._api.model_alias_resolve(self.name, alias)
        return ModelVersion._from_json(data, self._api)

    def set_alias(self, alias: str, version: int) -> None:
        """Point ``alias`` at version ``version`` (set or move it).

        Raises:
            headway.client.BadRequestError: a bad or reserved alias name, or no such version.
        """
        self._api.model_alias_set(self.name, alias, int(version))

    def delete_alias(self, alias: str) -> None:
        """Delete ``alias``; the version stays. Raises ``NotFoundError`` for an unknown alias."""
        self._api.model_alias_delete(self.name, alias)
