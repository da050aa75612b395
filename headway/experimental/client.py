"""``headway.experimental.client``: Determined's Python SDK names over Headway's REST API.

Port by changing ``from determined.experimental import client`` to ``from headway.experimental
import client``. Supported: ``login``, ``get_checkpoint(uuid).download(path, mode=)``
(``DownloadMode``),
``get_experiment(id).get_trials()``, ``get_trial(id).top_checkpoint()`` /
``list_checkpoints()``, the ``uuid`` / ``metadata`` / ``steps_completed`` attributes,
``Checkpoint.add_metadata``, and the
model registry: ``create_model``, ``get_model(name).register_version(uuid)``,
``get_version(n).checkpoint``, ``list_models``. Every call is a ``headway.client.RegistryAPI``
method; tokens are the CLI's (``headway login``).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import tarfile
from typing import Any

from headway.archive import safe_extractall
from headway.client import NotFoundError, RegistryAPI, resolve_token, save_token, wire
from headway.storage import DirectReadUnavailable, DownloadMode, copy_direct, direct_reader

DEFAULT_MASTER = "http://127.0.0.1:8000"
_api: RegistryAPI | None = None


def login(master: str | None = None, user: str | None = None, password: str | None = None) -> None:
    """Connect the module-level functions to a master (Determined's ``client.login``).

    Without ``user`` the token comes from ``$HEADWAY_TOKEN`` or a previous ``headway login``;
    with ``user`` and ``password`` a new token is requested and saved like ``headway login``.

    Arguments:
        master (str | None): registry URL (default ``$HEADWAY_MASTER``, else
            ``http://127.0.0.1:8000``).
        user (str | None), password (str | None): credentials.

    Raises:
        headway.client.UnauthenticatedError: wrong credentials.
    """
    global _api
    url = (master or os.environ.get("HEADWAY_MASTER") or DEFAULT_MASTER).rstrip("/")
    token: str | None
    if user is not None:
        token = RegistryAPI(url).login(user, password).token
        save_token(url, token, user)
    else:
        token = resolve_token(url)
    _api = RegistryAPI(url, token)


def _get_api() -> RegistryAPI:
    if _api is None:
        login()  # Determined logs in with defaults on first use too
    assert _api is not None
    return _api


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
class Trial:
    """A trial (Determined's ``client.Trial``): ``id``, ``experiment_id``, ``hparams``,
    ``state``; checkpoints via ``list_checkpoints`` / ``top_checkpoint``."""

    id: int
    experiment_id: int | None
    hparams: dict[str, Any]
    state: str | None
    _api: RegistryAPI = dataclasses.field(repr=False)

    def list_checkpoints(self) -> list[Checkpoint]:
        """The trial's checkpoints, newest (most steps) first."""
        items = self._api.trial_checkpoints(self.id)
        ckpts = [Checkpoint._from_row(c, self._api) for c in items]
        return sorted(ckpts, key=lambda c: c.steps_completed or 0, reverse=True)

    def top_checkpoint(
        self, sort_by: str | None = None, smaller_is_better: bool | None = None
    ) -> Checkpoint:
        """The best checkpoint: by ``metadata[sort_by]`` when given, else the latest.

        Determined sorts by the searcher metric of the checkpoint's validation; Headway keeps
        that value in the trial's ``best_validation`` only, so without ``sort_by`` this returns
        the latest checkpoint (under ``checkpoint_policy: best`` that is the best one).

        Raises:
            ValueError: the trial has no checkpoints, or none has ``metadata[sort_by]``.
        """
        ckpts = [c for c in self.list_checkpoints() if c.state in (None, "COMPLETED")]
        if sort_by is not None:
            ckpts = [c for c in ckpts if sort_by in c.metadata]
            ckpts.sort(key=lambda c: c.metadata[sort_by], reverse=smaller_is_better is False)
        if not ckpts:
            raise ValueError(f"trial {self.id} has no checkpoints")
        return ckpts[0]


@dataclasses.dataclass
class Experiment:
    """An experiment (Determined's ``client.Experiment``): ``id``, ``name``, ``state``,
    ``config``; trials via ``get_trials``."""

    id: int
    name: str | None
    state: str | None
    config: dict[str, Any]
    _api: RegistryAPI = dataclasses.field(repr=False)

    def get_trials(self) -> list[Trial]:
        """The experiment's trials, in id order."""
        items = self._api.experiment_trials(self.id)
        return sorted((_trial(t, self._api) for t in items), key=lambda t: t.id)

    def list_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint of the experiment, as the registry lists them."""
        items = self._api.experiment_checkpoints(self.id)
        return [Checkpoint._from_row(c, self._api) for c in items]


def _trial(row: wire.TrialRow, api: RegistryAPI) -> Trial:
    return Trial(
        id=row.id,
        experiment_id=row.experiment_id,
        hparams=dict(row.hparams),
        state=row.state,
        _api=api,
    )


def get_checkpoint(uuid: str) -> Checkpoint:
    """Determined's ``client.get_checkpoint``. Raises ``NotFoundError`` for an unknown uuid."""
    api = _get_api()
    return Checkpoint._from_row(api.checkpoint_get(uuid), api)


def get_trial(trial_id: int) -> Trial:
    """Determined's ``client.get_trial``. Raises ``NotFoundError`` for an unknown id."""
    api = _get_api()
    return _trial(api.trial_get(int(trial_id)), api)


def get_experiment(experiment_id: int) -> Experiment:
    """Determined's ``client.get_experiment``. Raises ``NotFoundError`` for an unknown id."""
    api = _get_api()
    data = api.experiment_get(int(experiment_id))
    return Experiment(
        id=int(data["id"]),
        name=data.get("name"),
        state=data.get("state"),
        config=dict(data.get("config") or {}),
        _api=api,
    )


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


def create_model(
    name: str,
    description: str = "",
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
    workspace_name: str | None = None,
) -> Model:
    """Determined's ``client.create_model``, in workspace ``workspace_name`` (default: the
    default workspace). Raises ``BadRequestError`` for an invalid name or an unknown workspace,
    ``APIError`` (403) when the user is not an editor there, ``ConflictError`` when the name is
    taken (in any workspace)."""
    api = _get_api()
    body: dict[str, Any] = {
        "name": name,
        "description": description,
        "metadata": metadata or {},
        "labels": labels or [],
    }
    if workspace_name is not None:
        body["workspace"] = workspace_name
    return Model._from_json(api.model_create(body), api)


def get_model(name: str) -> Model:
    """Determined's ``client.get_model``. Raises ``NotFoundError`` for an unknown name."""
    api = _get_api()
    return Model._from_json(api.model_get(name), api)


def list_models() -> list[Model]:
    """Determined's ``client.list_models`` (alias ``get_models``): the models the user may
    read (a role in their workspace), by name."""
    api = _get_api()
    return [Model._from_json(m, api) for m in api.model_list()]


get_models = list_models
