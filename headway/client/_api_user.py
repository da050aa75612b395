"""``RegistryAPI``'s user routes: the CLI's and the experimental client's calls (a user token).

Routes answering trials and checkpoints return typed rows (``wire.TrialRow``,
``wire.CheckpointRow``: the fields of the server's serializers, read by attribute; ``as_sent()``
gives the JSON back). Those answering other model rows (experiments, models, hosts, pools) return
the row as the server's DRF serializer wrote it (``wire.Row``, documented by that serializer in
the OpenAPI schema): the CLI prints them as sent (``--json``) and reads the fields it shows.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests

from headway.client._api_base import APIBase
from headway.client._lazy_wire import wire
from headway.client._routes import EXPERIMENT_ACTIONS, TRIAL_ACTIONS


def _model(name: str) -> str:
    # The server refuses names outside [A-Za-z0-9._-]; quoting keeps any other text in one
    # path segment, so it is answered 404 instead of reaching another route.
    return quote(name, safe="")


class UserAPI(APIBase):
    """The calls of a user's tools (see ``RegistryAPI``)."""

    def login(self, username: str, password: str | None) -> wire.LoginAnswer:
        """Exchange credentials for the user's API token (no token needed)."""
        answer = self._post("login", {"username": username, "password": password})
        return wire.LoginAnswer.model_validate(answer)

    # -- experiments ---------------------------------------------------------------------------

    def experiment_create(self, config: str, model_definition: str) -> wire.Row:
        """Create an experiment from its YAML ``config`` text and base64 model definition."""
        body = {"config": config, "model_definition": model_definition}
        row: wire.Row = self._post("experiment_create", body)
        return row

    def experiment_list(
        self, *, filter: str | None = None, order_by: str | None = None
    ) -> list[wire.Row]:
        """Every experiment the user may see, newest first or sorted by ``order_by`` (the
        experiment's fields, ``-`` for descending: ``-best_validation,name``); only those
        matching ``filter`` (the filter language, docs/search.md) when given."""
        params = {"filter": filter, "order_by": order_by}
        return self._list("experiment_list", {k: v for k, v in params.items() if v} or None)

    def experiment_get(self, experiment_id: int) -> wire.Row:
        """One experiment (``ExperimentSerializer``: state, progress, config, best_validation...)."""
        row: wire.Row = self._get("experiment_get", experiment_id=experiment_id)
        return row

    def experiment_delete(self, experiment_id: int) -> wire.Row | None:
        """Delete an ended experiment (its row answers in state DELETING; 409 while running)."""
        row: wire.Row | None = self._delete("experiment_delete", experiment_id=experiment_id)
        return row

    def trial_list(
        self,
        *,
        filter: str | None = None,
        order_by: str | None = None,
        experiment_id: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> wire.TrialPage:
        """One page of trials across experiments (of ``experiment_id`` only when given):
        ``count``, ``next``, ``previous`` and ``results``, matching ``filter`` and sorted by
        ``order_by`` (docs/search.md); a 400 naming ``filter`` raises ``APIError``."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        params.update({k: v for k, v in (("filter", filter), ("order_by", order_by)) if v})
        if experiment_id is not None:
            page = self._get("experiment_trials", params, experiment_id=experiment_id)
        else:
            page = self._get("trial_list", params)
        return wire.TrialPage.model_validate(page)

    def experiment_trials(self, experiment_id: int) -> list[wire.TrialRow]:
        """The experiment's trials."""
        rows = self._list("experiment_trials", experiment_id=experiment_id)
        return [wire.TrialRow.model_validate(row) for row in rows]

    def experiment_checkpoints(
        self, experiment_id: int, *, order_by: str | None = None
    ) -> list[wire.CheckpointRow]:
        """The experiment's checkpoints, newest first or by ``order_by``."""
        params = {"order_by": order_by} if order_by else None
        rows = self._list("experiment_checkpoints", params, experiment_id=experiment_id)
        return [wire.CheckpointRow.model_validate(row) for row in rows]

    def experiment_control(self, experiment_id: int, action: str) -> wire.Row:
        """POST ``action`` (pause, activate, cancel, kill, archive, unarchive: one route each);
        the experiment's row after it. 409 names the state when the transition is illegal."""
        if action not in EXPERIMENT_ACTIONS:
            raise ValueError(f"unknown experiment action {action!r}; one of {EXPERIMENT_ACTIONS}")
        row: wire.Row = self._post(f"experiment_{action}", experiment_id=experiment_id)
        return row

    # -- trials --------------------------------------------------------------------------------

    def trial_get(self, trial_id: int) -> wire.TrialRow:
        """One trial (``TrialSerializer``: state, hparams, summary_metrics...)."""
        return wire.TrialRow.model_validate(self._get("trial_get", trial_id=trial_id))

    def trial_summary_metrics(self, trial_id: int) -> list[wire.Row]:
        """Every series aggregate of the trial (``group``, ``name``, ``last``, ``last_step``,
        ``min``, ``max``, ``count``), by group then name, all pages (the trial itself embeds
        at most 100 in ``summary_metrics``)."""
        return self._list("trial_summary_metrics", {"limit": 1000}, trial_id=trial_id)

    def trial_checkpoints(self, trial_id: int) -> list[wire.CheckpointRow]:
        """The trial's checkpoints."""
        rows = self._list("trial_checkpoints", trial_id=trial_id)
        return [wire.CheckpointRow.model_validate(row) for row in rows]

    def trial_logs(self, trial_id: int, *, after: int | None = None) -> list[wire.Row]:
        """One page of the trial's log lines (``id``, ``message``, ``timestamp``), oldest first,
        after line id ``after``."""
        params = {} if after is None else {"after": after}
        page = self._get("trial_logs", params, trial_id=trial_id)
        return list(page.get("results", [])) if isinstance(page, dict) else list(page)

    def trial_metrics_csv(
        self, trial_id: int, params: dict[str, Any] | None = None
    ) -> requests.Response:
        """The trial's metric points as CSV, streamed (``group``, ``name`` filters); the caller
        iterates ``iter_content`` and closes it."""
        return self._stream("trial_metrics_csv", params, trial_id=trial_id)

    def trial_control(self, trial_id: int, action: str) -> wire.TrialRow:
        """POST ``action`` (pause, activate, cancel, kill: one route each); the trial's row."""
        if action not in TRIAL_ACTIONS:
            raise ValueError(f"unknown trial action {action!r}; one of {TRIAL_ACTIONS}")
        return wire.TrialRow.model_validate(self._post(f"trial_{action}", trial_id=trial_id))

    def trial_continue(self, trial_id: int, body: dict[str, Any]) -> wire.Row:
        """A new experiment continuing the trial (``checkpoint``, ``max_length``, ``hparams``);
        its row."""
        row: wire.Row = self._post("trial_continue", body, trial_id=trial_id)
        return row

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoint_get(self, uuid: str) -> wire.CheckpointRow:
        """One checkpoint (``CheckpointSerializer``: metadata, resources, state...)."""
        return wire.CheckpointRow.model_validate(self._get("checkpoint_get", uuid=uuid))

    def checkpoint_delete(self, uuid: str) -> None:
        """Delete the checkpoint's files (the row stays, DELETED; 409 when a model version or a
        resumable trial holds it)."""
        self._delete("checkpoint_delete", uuid=uuid)

    def checkpoint_download(
        self,
        uuid: str,
        *,
        path: str | None = None,
        format: str | None = None,
        offset: int = 0,
    ) -> requests.Response:
        """Stream the checkpoint as a tar (default), ``format`` tar|tgz|zip, or its one file
        ``path`` from byte ``offset`` on (a ``Range`` request: 206 when honoured). The caller
        iterates the response and closes it."""
        params = {k: v for k, v in (("path", path), ("format", format)) if v is not None}
        route = self.path("checkpoint_download", "GET", uuid=uuid)
        if offset:
            headers = {"Range": f"bytes={offset}-"}
            return self.session.request("GET", route, params=params, headers=headers, stream=True)
        return self.session.stream(route, params or None)

    # -- hosts and pools -----------------------------------------------------------------------

    def worker_list(self) -> list[wire.Row]:
        """The registered worker hosts and the runs on each."""
        return self._list("worker_list")

    def resource_pool_list(self) -> list[wire.Row]:
        """The resource pools with their hosts, slots and queued runs."""
        return self._list("resource_pool_list")

    def pool_node_enable(self, pool: str, node: str) -> wire.Row:
        """Put back node ``node`` of pool ``pool`` that Headway excluded after runs failed to
        start there (admins; 404 naming an unknown pool or node); the node's row."""
        row: wire.Row = self._post("pool_node_enable", pool=pool, node=node)
        return row

    # -- the model registry --------------------------------------------------------------------

    def model_create(self, body: dict[str, Any]) -> wire.Row:
        """Create a model (``name``, ``description``, ``labels``, ``metadata``); 409 when taken."""
        row: wire.Row = self._post("model_create", body)
        return row

    def model_list(self, params: dict[str, Any] | None = None) -> list[wire.Row]:
        """Models by name (``archived``, ``label`` filters)."""
        return self._list("model_list", params)

    def model_get(self, name: str) -> wire.Row:
        """One model (``latest_version``: its newest version number or None)."""
        row: wire.Row = self._get("model_get", name=_model(name))
        return row

    def model_versions(self, name: str, *, limit: int | None = None) -> list[wire.Row]:
        """The model's versions, newest first: all of them, or the first page of ``limit``."""
        if limit is None:
            return self._list("model_versions", name=_model(name))
        page = self._get("model_versions", {"limit": limit}, name=_model(name))
        return list(page["results"])

    def model_version_create(self, name: str, body: dict[str, Any]) -> wire.Row:
        """Register checkpoint ``checkpoint_uuid`` as the model's next version."""
        row: wire.Row = self._post("model_version_create", body, name=_model(name))
        return row

    def model_version_get(self, name: str, version: int) -> wire.Row:
        """Version ``version`` with its ``checkpoint`` row."""
        row: wire.Row = self._get("model_version_get", name=_model(name), version=int(version))
        return row

    def model_aliases(self, name: str) -> list[wire.Row]:
        """The model's aliases by name: ``{"alias", "version", "set_by", "updated_at"}``."""
        return self._list("model_aliases", name=_model(name))

    def model_alias_history(self, name: str) -> list[wire.Row]:
        """Every change of the model's aliases, newest first: ``{"alias", "action"
        (SET/MOVE/DELETE/VERSION_DELETED), "from_version", "to_version", "user",
        "created_at"}``."""
        return self._list("model_alias_history", name=_model(name))

    def model_alias_set(self, name: str, alias: str, version: int) -> wire.Row:
        """Point ``alias`` at version ``version`` (set or move it); the alias row. 400 naming
        ``alias`` or ``version`` for a bad name or a version the model lacks."""
        row: wire.Row = self._put(
            "model_alias_set", {"version": version}, name=_model(name), alias=_model(alias)
        )
        return row

    def model_alias_delete(self, name: str, alias: str) -> None:
        """Delete ``alias`` (404 when the model has no such alias); the version stays."""
        self._delete("model_alias_delete", name=_model(name), alias=_model(alias))

    def model_alias_resolve(self, name: str, alias: str) -> wire.Row:
        """The version ``alias`` points at, as ``model_version_get`` answers it (``latest``:
        the newest version)."""
        row: wire.Row = self._get("model_alias_resolve", name=_model(name), alias=_model(alias))
        return row
