"""``core.init()``: build the ``Context`` for managed mode (launched by a Headway worker,
``headway.get_cluster_info()`` is not None: REST collaborators with the trial's token) or local
mode (in-memory metrics, a local checkpoint directory), in one place, as Determined's
``core.init()`` does.
"""

from __future__ import annotations

import logging
import os
import pathlib
from typing import Any

from headway._info import ClusterInfo, get_cluster_info
from headway.client import Session
from headway.core._checkpoint import CheckpointContext
from headway.core._checkpoint_registry import LocalCheckpointRegistry, RESTCheckpointRegistry
from headway.core._context import Context
from headway.core._distributed import DistributedContext, default_distributed
from headway.core._metrics import LocalMetricSink, RegistryMetricReporter
from headway.core._preempt import PreemptContext, PreemptionWatcher, PreemptMode
from headway.core._searcher import (
    LocalSearcherReporter,
    RegistrySearcherReporter,
    SearcherContext,
)
from headway.core._system_metrics import SystemMetricsSampler, sampler_config
from headway.core._tensorboard import TensorboardFiles, TensorboardMode
from headway.core._train import TrainContext
from headway.expconf import Length, Unit, checkpoint_storage_json
from headway.storage import StorageManager, build_storage_manager

logger = logging.getLogger("headway.core")

DEFAULT_MASTER_OUTAGE_S = 1800.0  # HEADWAY_MASTER_OUTAGE_SECONDS when unset
DEFAULT_LOCAL_CHECKPOINT_DIR = "checkpoints"


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    max_length: int | dict[str, int] | None = None,
    preempt_poll_interval: float = 1.0,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """Build the Core API ``Context`` for this process (use it as ``with core.init() as ...``).

    Managed mode when launched by a Headway worker (``headway.get_cluster_info()`` is not None):
    metrics, checkpoints, preemption and searcher talk to the registry with the trial's token.
    Local mode otherwise: metrics are logged and kept in memory
    (``core_context.train.reported_metrics()``), checkpoints go to a local directory,
    ``should_preempt()`` is always False.

    All arguments are keyword-only so the signature can grow without breaking callers.

    Arguments:
        distributed (DistributedContext | None): ranks of a multi-worker trial, e.g.
            ``DistributedContext.from_torch_distributed()``. Default: the launcher's ranks when
            ``$WORLD_SIZE`` > 1 (``torchrun`` / ``headway.launch.torch_distributed``), else a
            single worker; on the cluster a trial with several slots and no launcher is refused
            (``ValueError``), as Determined does.
        checkpoint_storage (str | dict | None): overrides where checkpoints go: a directory path,
            or a ``checkpoint_storage`` dict (``{"type": "shared_fs", "host_path": ...}``).
            Default: the experiment's ``checkpoint_storage`` (managed) or ``./checkpoints``
            (local).
        preempt_mode (PreemptMode): how ranks learn about preemption (see ``PreemptMode``).
        max_length (int | dict | None): local mode only (a Headway extension): length of the
            single searcher operation, e.g. ``{"epochs": 3}`` or ``500``. Without it local mode
            yields one operation of length 1 in epochs, as Determined does. Ignored in managed
            mode (the config's ``searcher.max_length``).
        preempt_poll_interval (float): seconds between preemption polls (managed mode).
        tensorboard_mode (TensorboardMode): ``AUTO`` (default): on the cluster the chief writes
            reported training / validation metrics to ``train.get_tensorboard_path()`` and
            stores that folder with its checkpoints; ``MANUAL``: only what
            ``train.upload_tensorboard_files()`` chose (see ``core.TensorboardMode``).

    On the cluster the chief also samples CPU, GPU, memory and throughput every
    ``system_metrics.interval_s`` seconds (metric group ``system``; see ``Context.system_metrics``
    and docs/core-api.md); ``HEADWAY_SYSTEM_METRICS=0`` turns that off, ``=1`` on locally.

    Raises:
        ValueError: naming the field, for a bad ``checkpoint_storage`` / ``max_length`` / config
            (``system_metrics.interval_s`` ...) or ``HEADWAY_SYSTEM_METRICS``.
    """
    return init_for(
        get_cluster_info(),
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        max_length=max_length,
        preempt_poll_interval=preempt_poll_interval,
        tensorboard_mode=tensorboard_mode,
    )


def init_for(
    info: ClusterInfo | None,
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    max_length: int | dict[str, int] | None = None,
    preempt_poll_interval: float = 1.0,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """``init()`` for the run ``info`` describes (None: local mode) rather than the one
    ``$HEADWAY_CLUSTER_INFO`` names: ``headway.experimental.core_v2`` builds the Core API of the
    unmanaged run it started this way. Arguments and errors as ``init()``'s."""
    distributed = default_distributed(distributed, info)
    if info is None:
        context = _local_init(distributed, checkpoint_storage, preempt_mode, max_length)
    else:
        context = _managed_init(
            info, distributed, checkpoint_storage, preempt_mode, preempt_poll_interval
        )
    # TensorBoard files travel inside the chief's checkpoints (docs/decisions/sdk.md).
    tensorboard = TensorboardFiles(
        mode=tensorboard_mode,
        trial_id=info.trial.trial_id if info is not None else 0,
        rank=distributed.rank,
        auto_write=info is not None,
    )
    context.train._tensorboard = tensorboard
    context.checkpoint._add_file_writer(tensorboard.write_into_checkpoint)
    # System metrics: the chief samples its host (only the chief's reports are stored).
    settings = sampler_config(
        info.trial.config.system_metrics if info else None, managed=info is not None
    )
    if settings.enabled and distributed.rank == 0:
        context.system_metrics = SystemMetricsSampler(
            context.train._report_system, settings.interval_s, context.train._counters
        )
    return context


def _storage_from_argument(value: str | dict[str, Any]) -> StorageManager:
    if isinstance(value, dict):
        return build_storage_manager(value)
    if isinstance(value, (str, pathlib.Path)):
        if str(value).startswith("s3://"):
            bucket, _, prefix = str(value)[len("s3://") :].partition("/")
            return build_storage_manager({"type": "s3", "bucket": bucket, "prefix": prefix})
        path = pathlib.Path(value).expanduser().absolute()
        return build_storage_manager({"type": "shared_fs", "host_path": str(path)})
    raise ValueError(f"checkpoint_storage must be a path or a dict, got {type(value).__name__}")


def _local_init(
    distributed: DistributedContext,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
    max_length: int | dict[str, int] | None,
) -> Context:
    storage = _storage_from_argument(checkpoint_storage or DEFAULT_LOCAL_CHECKPOINT_DIR)
    length, unit = _local_init_length(max_length)
    logger.info("headway.core: local mode (no cluster info); checkpoints in %s", storage)
    sink = LocalMetricSink()
    reporter = LocalSearcherReporter()
    return Context(
        train=TrainContext(sink=sink, distributed=distributed, reporter=reporter),
        checkpoint=CheckpointContext(
            distributed=distributed, storage_manager=storage, registry=LocalCheckpointRegistry()
        ),
        preempt=PreemptContext(distributed=distributed, watcher=None, mode=preempt_mode),
        searcher=SearcherContext(
            distributed=distributed,
            reporter=reporter,
            max_length=length,
            unit=unit,
        ),
        distributed=distributed,
        info=None,
        metric_sink=sink,
    )


def _local_init_length(max_length: int | dict[str, int] | None) -> tuple[int, Unit | None]:
    """``core.init(max_length=)`` in local mode: a bare int is a count with no unit.

    Without it, one operation of length 1 in epochs, as Determined's ``DummySearcherContext``
    (``core/_searcher.py``) yields when no cluster is there.
    """
    if max_length is None:
        return 1, Unit.EPOCHS
    length = Length.parse(max_length, "max_length")
    return length.value, (None if isinstance(max_length, int) else length.unit)


def _managed_init(
    info: ClusterInfo,
    distributed: DistributedContext,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
    preempt_poll_interval: float,
) -> Context:
    config = info.trial.config
    trial_id, run_id = info.trial.trial_id, info.trial.run_id
    if checkpoint_storage is not None:
        storage = _storage_from_argument(checkpoint_storage)
    else:
        if config.checkpoint_storage is None:
            raise ValueError("the experiment config has no checkpoint_storage")
        storage = build_storage_manager(checkpoint_storage_json(config))
    length: int | None = None
    unit: Unit | None = None
    max_length = config.searcher.max_length
    if max_length is not None:
        # The searcher's current operation (e.g. an ASHA rung), in max_length's unit.
        length = info.searcher_length if info.searcher_length is not None else max_length.value
        unit = max_length.unit
    # else (Determined 0.38): no operations; the script decides how long to train.

    def session(**kwargs: Any) -> Session:
        # One Session per thread: requests.Session is not documented as thread-safe.
        return Session(info.master_url, info.token, **kwargs)

    # Every call the trial makes rides out a registry outage of up to `outage` seconds (they
    # are idempotent: checkpoints on uuid, metrics on steps, searcher reports on length).
    outage = master_outage_seconds()
    # The reporter retries itself, so its session must not retry (or back off) again.
    sink = RegistryMetricReporter(session(max_retries=0), trial_id, outage_seconds=outage)
    main_session = session(outage_seconds=outage)
    reporter = RegistrySearcherReporter(session(outage_seconds=outage), trial_id)
    watcher = PreemptionWatcher(
        session(max_retries=0, timeout=30.0), trial_id, run_id, interval=preempt_poll_interval
    )
    return Context(
        train=TrainContext(
            sink=sink,
            distributed=distributed,
            run_id=run_id,
            session=main_session,
            experiment_id=info.trial.experiment_id,
            reporter=reporter,
        ),
        checkpoint=CheckpointContext(
            distributed=distributed,
            storage_manager=storage,
            registry=RESTCheckpointRegistry(
                main_session, trial_id, run_id, flush_metrics=sink.flush
            ),
        ),
        preempt=PreemptContext(
            distributed=distributed,
            watcher=watcher,
            mode=preempt_mode,
            session=main_session,
            trial_id=trial_id,
            run_id=run_id,
        ),
        searcher=SearcherContext(
            distributed=distributed,
            reporter=reporter,
            max_length=length,
            unit=unit,
        ),
        distributed=distributed,
        info=info,
        metric_sink=sink,
        close_timeout=outage,
    )


def master_outage_seconds() -> float:
    """``HEADWAY_MASTER_OUTAGE_SECONDS`` (default 1800): how long a trial process keeps retrying
    while the registry is unreachable before it fails with ``MasterUnreachableError``.

    Raises:
        ValueError: naming the variable when it is not a number > 0.
    """
    raw = os.environ.get("HEADWAY_MASTER_OUTAGE_SECONDS", "")
    if not raw.strip():
        return DEFAULT_MASTER_OUTAGE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise ValueError(
            f"HEADWAY_MASTER_OUTAGE_SECONDS must be a number of seconds > 0, got {raw!r}"
        )
    return value
