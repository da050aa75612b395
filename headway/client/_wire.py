"""Wire models: the JSON the registry answers with, shared by the server and ``RegistryAPI``.

The server builds its answers from these models (``Model(...).model_dump(mode="json")``) and its
OpenAPI schema documents each response with them (drf-spectacular's pydantic support), so the
client's parsing and the server's output cannot drift apart. Shapes follow aim's pydantic
``response_model``s. Models ignore fields they do not know, so an older client keeps working
against a newer server that added one.

The host agent's routes and the host-token admin routes, and the REST routes that
answer a plain JSON object rather than a DRF serializer's rows: login, a trial's
SDK calls (metrics, preemption, progress, searcher), metric series, checkpoint metadata and
checkpoint GC. Routes answering model rows (experiments, trials, checkpoints) are documented by
their DRF serializers; trials and checkpoints are read as the typed rows ``TrialRow`` and
``CheckpointRow`` (``headway.client._wire_rows``), the other rows as sent (``Row``). A test (``tests/registry/api/test_api_schema_responses.py``) checks that every
operation documents its answer with a schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from headway.expconf import ExperimentConfig, config_json, parse_received_config

# A model row as the server's DRF serializer writes it (experiments, models, hosts, pools; trials
# and checkpoints have typed rows, ``TrialRow`` and ``CheckpointRow``): documented by that
# serializer in the OpenAPI schema, kept as sent so the CLI's ``--json`` prints exactly what the
# registry answered.
Row = dict[str, Any]


class WireModel(BaseModel):
    """Base of every wire model: unknown fields are ignored (forward compatibility)."""

    model_config = ConfigDict(extra="ignore")


class HostTokenInfo(WireModel):
    """A host token as admins list it; never its key (only its digest is stored).

    Attributes:
        name (str): the host name the token may register as.
        created_at (datetime): when it was issued.
        created_by (str | None): the admin's username (None: a management command).
        revoked_at (datetime | None): when it was revoked; None while it is live.
        last_used_at (datetime | None): its last authenticated request (to the minute).
    """

    name: str
    created_at: datetime
    created_by: str | None = None
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


class HostTokenCreated(HostTokenInfo):
    """A token just issued, with its ``key``: the only time the key is shown."""

    key: str


class HostTokenList(WireModel):
    """Every host token, live and revoked, by name."""

    tokens: list[HostTokenInfo]


def host_queue_name(namespace: str, host: str) -> str:
    """The Celery queue of host ``host`` in cluster namespace ``namespace`` (its
    ``HEADWAY_QUEUE``): ``<namespace>.host.<host>``. The master sends the runs placed on the
    host there and names it in ``HostInfo.queue``; the host's agent consumes it."""
    return f"{namespace}.host.{host}"


class HostInfo(WireModel):
    """A host as the registry keeps it after a heartbeat.

    Attributes:
        name (str): the host (the token's name).
        pool (str): the worker pool it runs for.
        queue (str): its Celery queue, where placed runs are sent.
        slots (int): slots it offers; ``devices`` names them, lowest first.
        gpu (bool): whether the devices are CUDA device ids.
        started_at (datetime): when the worker started.
        heartbeat_at (datetime | None): the heartbeat just recorded (None once stopped).
        redispatched (int): runs placed on it whose tasks were sent again (``redispatch``).
        renewed (int): leases renewed (runs and shares listed, placed here, not EXITED).
        heartbeat_seconds (float): how often the master expects this host to beat
            (``HEADWAY_HOST_HEARTBEAT_SECONDS``), ``lease_seconds`` how long a renewal holds
            (``HEADWAY_LEASE_SECONDS``), ``kill_grace_seconds`` SIGTERM-to-SIGKILL
            (``HEADWAY_KILL_GRACE_SECONDS``): the master's values, so host and master never
            disagree on when a lease ends (docs/scheduling.md).
        outage_tolerance_seconds (float | None): how long a host that cannot reach the master
            keeps its runs (``HEADWAY_OUTAGE_TOLERANCE_SECONDS``; None from an older master:
            the host's own setting).
        stale_runs (list[list[int]]): the ``[trial_id, run_id]`` of the runs this
            heartbeat listed that the master already ended (given away while the host could
            not reach it): the host stops them at once; ``stale_shares`` the same for shares
            (``[trial_id, run_id, node_rank]``). While it lists any, the host is not placeable.
    """

    name: str
    pool: str
    queue: str
    slots: int
    devices: list[str]
    gpu: bool
    started_at: datetime
    heartbeat_at: datetime | None
    redispatched: int = 0
    renewed: int = 0
    heartbeat_seconds: float = 10.0
    lease_seconds: float = 30.0
    kill_grace_seconds: float = 10.0
    outage_tolerance_seconds: float | None = None
    # Lists of fixed length, not tuples: pydantic writes a tuple as JSON Schema's
    # ``prefixItems``, which OpenAPI 3.0 (the API's schema) does not have.
    stale_runs: list[Annotated[list[int], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list
    )
    stale_shares: list[Annotated[list[int], Field(min_length=3, max_length=3)]] = Field(
        default_factory=list
    )


class Claim(WireModel):
    """The answer to a claim: ``claimed`` False when another delivery got it first or the run
    (or share) is no longer runnable; the caller then does nothing."""

    claimed: bool


class SharePart(WireModel):
    """One other host's part of a run over several hosts (node 1, 2...)."""

    node_rank: int
    host: str | None
    slots: int
    devices: list[str]


class LaunchSpec(WireModel):
    """What a host needs to start its part of a run (the chief's, or share ``node_rank``).

    Attributes:
        experiment_id, trial_id, run_id (int): the run.
        node_rank (int): 0 for the chief's part, else the share's node.
        hparams (dict): the trial's hyperparameters; ``trial_seed`` its seed.
        experiment_config (ExperimentConfig): the experiment's stored config, validated
            again on arrival by ``ExperimentConfig``'s own rules
            (``headway.expconf.parse_received_config``); on the wire it is the stored JSON as
            is (``headway.expconf.config_json``).
        latest_checkpoint (str | None): uuid to resume (or warm-start) from.
        latest_checkpoint_steps (int | None): its ``steps_completed``.
        searcher_length (int | None): the operation length this run trains to.
        slots (int), devices (list[str]), gpu (bool): this part's slots on this host.
        run_slots (int): the chief part's slots; with ``shares``, the run's world size is
            ``run_slots + sum(share.slots)``.
        shares (list[SharePart]): the other hosts' parts (empty for a one-host run).
        chief_host (str | None): the host of the run's chief part (node 0).
        model_definition_bytes (int): size of the archive ``model-definition/`` returns.
    """

    experiment_id: int
    trial_id: int
    run_id: int
    node_rank: int = 0
    hparams: dict[str, Any]
    trial_seed: int
    experiment_config: ExperimentConfig
    latest_checkpoint: str | None
    latest_checkpoint_steps: int | None
    searcher_length: int | None
    slots: int
    devices: list[str]
    gpu: bool
    run_slots: int
    shares: list[SharePart] = Field(default_factory=list)
    chief_host: str | None = None
    model_definition_bytes: int

    @field_validator("experiment_config", mode="before")
    @classmethod
    def _parse_config(cls, value: Any) -> Any:
        return parse_received_config(value)

    @field_serializer("experiment_config")
    def _dump_config(self, config: ExperimentConfig) -> dict[str, Any]:
        return config_json(config)


class RunToken(WireModel):
    """A run's trial-scoped token (``HEADWAY_TOKEN`` of its processes), asked for at launch so
    that no task message carries it."""

    token: str


class RunStatus(WireModel):
    """A run's state as its host needs it after a report.

    Attributes:
        state (str): the run's state (QUEUED, STARTING, RUNNING, EXITED).
        stop_requested (str): "" to keep going; "pause", "cancel", "kill", "preempt" or
            "close": why its processes must stop ("kill": stop them now).
        share_state (str | None): on share routes, the share's own state.
    """

    state: str
    stop_requested: str
    share_state: str | None = None


class LogsAccepted(WireModel):
    """How many log lines were stored: all but those already stored at their position (a
    resent batch); a line is cut, never dropped."""

    accepted: int


class Rendezvous(WireModel):
    """Where a run's hosts meet (torchrun's static rendezvous on the chief host).

    Attributes:
        ready (bool): the chief published its address (a share waits until then).
        run_state (str): the run's state; a share stops waiting once it is EXITED.
        address (str | None), port (int | None): the chief's rendezvous endpoint.
        nnodes (int): hosts the run spans; ``node_rank`` this host's index.
        total_slots (int): the run's world size.
    """

    ready: bool
    run_state: str
    address: str | None = None
    port: int | None = None
    nnodes: int
    node_rank: int
    total_slots: int


class ShareStatus(WireModel):
    """One share as the chief's host watches it.

    Attributes:
        problem (str): "" while the share is fine; else ``"failed: <why>"`` (it exited non-zero:
            the run fails) or ``"lost: <why>"`` (its host is gone, its lease lapsed or it never
            started: the run is re-queued, not counted), judged on the master's clock.
    """

    node_rank: int
    host: str | None
    state: str
    exit_code: int | None
    heartbeat_at: datetime | None
    problem: str = ""


class ShareStatusList(WireModel):
    """The shares of a run, by node rank."""

    shares: list[ShareStatus]


# -- users and trials (the SDK's, the CLI's and the dashboard's routes) ---------------------------


class LoginAnswer(WireModel):
    """``POST auth/login/``: the user's API token (created on first login) and username."""

    token: str
    username: str


class ShouldPreempt(WireModel):
    """``GET trials/{id}/preempt/``: True once the run was asked to stop (checkpoint, exit)."""

    should_preempt: bool


class PreemptAcknowledged(WireModel):
    """``POST trials/{id}/preempt/ack/``: whether the acknowledgement was recorded (False: the
    run has no pending stop request, or has exited)."""

    acknowledged: bool


class ProgressRecorded(WireModel):
    """``POST trials/{id}/progress/``: the progress stored, a fraction in [0, 1]."""

    progress: float


class OperationRecorded(WireModel):
    """``POST trials/{id}/searcher/completed/``: the operation was recorded; ``next_length`` is
    the length of the trial's next operation, None when it has none (adaptive searchers)."""

    recorded: bool
    next_length: int | None


class EarlyExitRecorded(WireModel):
    """``POST trials/{id}/searcher/early_exit/``: the reason stored (errored, user_canceled,
    invalid_hp); the searcher hears it when the trial ends."""

    early_exit: str


# -- checkpoints ---------------------------------------------------------------------------------


class CheckpointRegistered(WireModel):
    """``POST trials/{id}/checkpoints/`` with ``Prefer: return=minimal`` (RFC 7240): the
    registered checkpoint's identity, without the full row's metrics and ranking."""

    uuid: str
    trial_id: int
    steps_completed: int
    state: str


class CheckpointMetadataMerged(WireModel):
    """``POST checkpoints/{uuid}/metadata/``: the checkpoint's whole metadata after the merge."""

    uuid: str
    metadata: dict[str, Any]


class CheckpointGCQueued(WireModel):
    """``POST experiments/{id}/checkpoints/gc/`` (202): the GC pass was queued; ``detail`` says
    so in a sentence."""

    detail: str


# The admin's host operations live in their own module (this one stays small); re-exported here
# so ``wire.HostStatus`` reads like every other model.
from headway.client._wire_hosts import HOST_TOKEN_REVOKED as HOST_TOKEN_REVOKED  # noqa: E402
from headway.client._wire_hosts import HostRemoved as HostRemoved  # noqa: E402
from headway.client._wire_hosts import HostStatus as HostStatus  # noqa: E402
from headway.client._wire_hosts import HostStatusList as HostStatusList  # noqa: E402

# A trial's and an experiment's metric series (headway.client._wire_metrics), re-exported too.
from headway.client._wire_metrics import ExperimentMetrics as ExperimentMetrics  # noqa: E402
from headway.client._wire_metrics import ExperimentMetricSeries as ExperimentMetricSeries  # noqa: E402
from headway.client._wire_metrics import MetricsAccepted as MetricsAccepted  # noqa: E402
from headway.client._wire_metrics import MetricSeries as MetricSeries  # noqa: E402
from headway.client._wire_metrics import TrialMetrics as TrialMetrics  # noqa: E402

# The typed model rows of trials and checkpoints (headway.client._wire_rows), re-exported too.
from headway.client._wire_rows import CheckpointRow as CheckpointRow  # noqa: E402
from headway.client._wire_rows import TrialPage as TrialPage  # noqa: E402
from headway.client._wire_rows import TrialRow as TrialRow  # noqa: E402
from headway.client._wire_rows import WireRow as WireRow  # noqa: E402

# The admins' webhooks (headway.client._wire_webhooks), re-exported in the same way.
from headway.client._wire_webhooks import WebhookCreated as WebhookCreated  # noqa: E402
from headway.client._wire_webhooks import WebhookDelivery as WebhookDelivery  # noqa: E402
from headway.client._wire_webhooks import WebhookDeliveryList as WebhookDeliveryList  # noqa: E402
from headway.client._wire_webhooks import WebhookInfo as WebhookInfo  # noqa: E402
from headway.client._wire_webhooks import WebhookList as WebhookList  # noqa: E402
