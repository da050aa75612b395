"""Typed model rows: trials and checkpoints as the registry's REST serializers write them.

``TrialRow`` is a row of ``TrialSerializer`` (``GET trials/{id}/``, ``trials/``, an
experiment's ``trials/``, a trial's controls), ``CheckpointRow`` one of ``CheckpointSerializer``
(``GET checkpoints/{uuid}/``, a trial's or an experiment's ``checkpoints/``). Their fields are
the serializers' fields, in the same order; a test (``tests/headway/client/test_wire_rows.py``)
checks that they stay so. Like Determined's ``bindings.v1Trial`` they are what the CLI and the
SDK read by attribute, so a field's name is written once on the client side.

A field a newer registry adds is kept (``extra="allow"``) and ``as_sent()`` gives the row back as
the registry sent it, which the CLI's ``--json`` prints. Only the fields that identify a row are
required; the others default to the registry's own defaults, so a row from an older registry
that lacks a later field still reads.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class WireRow(BaseModel):
    """Base of the typed model rows: unknown fields are kept, as sent."""

    model_config = ConfigDict(extra="allow")

    def as_sent(self) -> dict[str, Any]:
        """The row as JSON with exactly the fields the registry sent (unknown ones included);
        timestamps in ISO 8601, as the registry writes them."""
        return self.model_dump(mode="json", exclude_unset=True)


class TrialRow(WireRow):
    """A trial (``TrialSerializer``).

    Attributes:
        id (int), experiment_id (int): the trial and its experiment.
        state (str): ACTIVE, PAUSED, STOPPING_*, COMPLETED, CANCELED, ERROR...
        run_state (str | None): its current run's state (QUEUED, STARTING, RUNNING, EXITED);
            None before its first run.
        run_id (int): its current run (0: none yet); ``restarts`` the failed runs counted
            against ``max_restarts``.
        hparams (dict): its hyperparameters, nested as in the config; ``seed`` its seed.
        steps_completed (int): batches trained; ``progress`` the fraction of its searcher
            length done, in [0, 1].
        best_validation (float | None): the best searcher metric value reported.
        latest_checkpoint (str | None), warm_start_checkpoint (str | None): checkpoint uuids.
        summary_metrics (dict): ``{group: {name: {last, min, max, count, ...}}}``, at most 100
            series (the searcher metric's first); ``summary_metrics_count`` counts them all.
        request_id (str): the searcher's id of the trial.
        searcher_length (int | None), searcher_completed_length (int), searcher_closed (bool),
            early_exit (str): the searcher's operation and the trial's place in the search.
        scheduling_message (str): why its run waits for a host ("" when it does not).
        notes (str): Markdown; ``labels`` the user's labels.
        created_at (datetime), ended_at (datetime | None): when it started and ended.
    """

    # The scalar fields one screen of a trial shows (``headway trial describe``), in order.
    SUMMARY_FIELDS: ClassVar[tuple[str, ...]] = (
        "id",
        "experiment_id",
        "state",
        "run_state",
        "run_id",
        "restarts",
        "steps_completed",
        "best_validation",
        "latest_checkpoint",
        "seed",
    )

    id: int
    experiment_id: int
    state: str
    run_state: str | None = None
    run_id: int = 0
    restarts: int = 0
    hparams: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    steps_completed: int = 0
    progress: float = 0.0
    best_validation: float | None = None
    latest_checkpoint: str | None = None
    warm_start_checkpoint: str | None = None
    summary_metrics: dict[str, Any] = Field(default_factory=dict)
    summary_metrics_count: int = 0
    request_id: str = ""
    searcher_length: int | None = None
    searcher_completed_length: int = 0
    searcher_closed: bool = False
    early_exit: str = ""
    scheduling_message: str = ""
    notes: str = ""
    labels: Any = Field(default_factory=dict)
    created_at: datetime | None = None
    ended_at: datetime | None = None


class TrialPage(WireRow):
    """One page of trials (``GET trials/``, an experiment's ``trials/`` with ``limit``).

    Attributes:
        count (int): trials matching in all; ``next`` / ``previous`` the URLs of the pages
            around this one (None at either end).
        results (list[TrialRow]): this page's trials.
    """

    count: int
    next: str | None = None
    previous: str | None = None
    results: list[TrialRow] = Field(default_factory=list)


class CheckpointRow(WireRow):
    """A checkpoint (``CheckpointSerializer``).

    Attributes:
        uuid (str): the checkpoint; ``trial_id``, ``experiment_id``, ``run_id`` where it came
            from.
        steps_completed (int): the trial's batches trained when it was saved.
        state (str): ACTIVE (being written), COMPLETED, PARTIAL, DELETED...
        resources (dict[str, int]): ``{relative path: size in bytes}``; ``size`` their sum.
        metadata (dict): the user's metadata; ``storage`` where its files live.
        created_at (datetime | None): when it was registered.
        validation_metrics (dict | None): the validation report at its step (None if none);
            ``training_metrics`` the latest training report at or before it.
        searcher_metric (float | int | str | None): the searcher metric in
            ``validation_metrics``.
        best (bool): the best COMPLETED checkpoint of its trial; ``latest`` the trial's
            ``latest_checkpoint``.
    """

    # The columns a table of checkpoints shows (``headway trial describe``), in order.
    SUMMARY_FIELDS: ClassVar[tuple[str, ...]] = ("uuid", "steps_completed", "state")

    uuid: str
    trial_id: int
    experiment_id: int | None = None
    run_id: int = 0
    steps_completed: int
    state: str
    resources: dict[str, int] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    size: int = 0
    storage: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    validation_metrics: dict[str, Any] | None = None
    training_metrics: dict[str, Any] | None = None
    # int before float: a whole number stays one, as sent.
    searcher_metric: int | float | str | None = None
    best: bool = False
    latest: bool = False
