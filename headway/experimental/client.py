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
from typing import Any

from headway.client import RegistryAPI, resolve_token, save_token, wire
from headway.experimental._client_objects import Checkpoint, Model, ModelVersion
from headway.storage import DownloadMode

__all__ = [
    "Checkpoint",
    "DownloadMode",
    "Experiment",
    "Model",
    "ModelVersion",
    "Trial",
    "create_model",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_models",
    "get_trial",
    "list_models",
    "login",
]

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
