"""``HeadwayCallback``: ``DetCallback`` that opens its own Core API context through
``headway.experimental.core_v2``, for a Trainer script run anywhere (an unmanaged run) or,
unchanged, as a managed trial."""

from __future__ import annotations

import dataclasses
from typing import Any

import transformers

from headway._info import ClusterInfo
from headway.client import RegistryAPI
from headway.core import (
    CheckpointContext,
    DistributedContext,
    PreemptContext,
    SearcherContext,
    TrainContext,
)
from headway.experimental import core_v2
from headway.transformers._callback import CoreContext, DetCallback


@dataclasses.dataclass(frozen=True)
class _Singletons:
    """``core_v2``'s singletons after ``core_v2.init()``, as one context."""

    train: TrainContext
    checkpoint: CheckpointContext
    preempt: PreemptContext
    searcher: SearcherContext
    distributed: DistributedContext
    info: ClusterInfo | None


class HeadwayCallback(DetCallback):
    """``DetCallback`` without a context to pass: it calls ``core_v2.init(config=...)`` itself.

    Outside a cluster that creates (or, with the same ``external_experiment_id`` and
    ``external_trial_id``, resumes) an unmanaged trial at ``$HEADWAY_MASTER`` with the user's
    token; inside a managed trial it gives the trial's own contexts and ignores ``config``.
    ``core_v2.close()`` (called at exit if the script does not) ends the run: COMPLETED, or
    ERROR after an uncaught exception. Resuming works as with ``DetCallback``: the latest
    checkpoint lands in ``args.output_dir`` and ``args.resume_from_checkpoint`` names it::

        callback = HeadwayCallback(args, core_v2.Config(name="bert-tiny",
                                   external_experiment_id="sweep", external_trial_id="lr-3"))
        trainer = Trainer(..., args=args, callbacks=[callback])
        trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
        callback.close()

    Arguments:
        args (transformers.TrainingArguments): the Trainer's arguments.
        config (core_v2.Config | None): the unmanaged run's config (name, hparams, searcher
            metric, checkpoint storage, external ids); required outside a managed trial.
        core_context: a context to use instead (then nothing is opened or closed here).
        client (RegistryAPI | None): the registry and token (default as ``core_v2.init``'s).
        filter_metrics, user_data: as ``DetCallback``'s.

    Raises:
        ValueError: as ``core_v2.init()`` (no config outside a cluster, a refused config or
            token) and as ``DetCallback``.
    """

    def __init__(
        self,
        args: transformers.TrainingArguments,
        config: core_v2.Config | None = None,
        *,
        core_context: CoreContext | None = None,
        client: RegistryAPI | None = None,
        filter_metrics: list[str] | None = None,
        user_data: dict[str, Any] | None = None,
    ) -> None:
        self._opened = core_context is None
        if core_context is None:
            core_context = _open(config, client)
        super().__init__(core_context, args, filter_metrics=filter_metrics, user_data=user_data)

    def close(self) -> None:
        """Deliver queued metrics and end the run this callback opened (``core_v2.close()``);
        does nothing for a context it was given."""
        if self._opened:
            core_v2.close()
            self._opened = False


def _open(config: core_v2.Config | None, client: RegistryAPI | None) -> _Singletons:
    core_v2.init(config=config, client=client)
    assert core_v2.train is not None and core_v2.checkpoint is not None
    assert core_v2.preempt is not None and core_v2.searcher is not None
    assert core_v2.distributed is not None
    return _Singletons(
        train=core_v2.train,
        checkpoint=core_v2.checkpoint,
        preempt=core_v2.preempt,
        searcher=core_v2.searcher,
        distributed=core_v2.distributed,
        info=core_v2.info,
    )
