"""The harness loop for a ``DeepSpeedTrial``: Headway's ``_Loop`` with DeepSpeed's batch step,
validation iterator and sharded checkpoints.

Everything else (epochs, reporting, validation and checkpoint periods, preemption, searcher
progress, trainer state) is ``headway.pytorch._loop._Loop``. Source of the semantics: Determined
0.38 ``pytorch/deepspeed/_deepspeed_trial.py`` (``DeepSpeedTrialController``).
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable
from typing import Any

import torch

from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._loop import _Loop
from headway.pytorch._metrics import detach_metrics
from headway.pytorch.deepspeed._data import BatchSlots, MicroBatchStream
from headway.pytorch.deepspeed._trial import DeepSpeedTrial

logger = logging.getLogger("headway.pytorch.deepspeed")

STREAM_KEY = "micro_batches"  # trainer_state key of the training iterator's position
RANK_RNG_KEY = "rank_rng_states"  # state-dict.pth: every rank's RNG states, in rank order


class _DeepSpeedLoop(_Loop):
    """``_Loop`` whose loaders are ``BatchSlots`` around the trial's ``MicroBatchStream``s."""

    trial: Any  # a DeepSpeedTrial
    train_loader: BatchSlots  # type: ignore[assignment]
    val_loader: BatchSlots  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.train_stream: MicroBatchStream | None = self.train_loader.stream
        self.val_stream: MicroBatchStream | None = self.val_loader.stream
        self._stream_position: dict[str, int] | None = None

    # -- training ------------------------------------------------------------------------------

    def _batch_trainer(self) -> Callable[..., Any]:
        """Per harness batch: ``train_batch`` once per micro-batch of gradient accumulation
        (once for pipeline engines and manual accumulation); all but the last micro-batch's
        metrics go to the pending list here, the last one is returned to the loop."""
        ctx: Any = self.ctx
        train_batch = self.trial.train_batch  # read now: the profiler may have wrapped it
        accumulation = ctx.get_num_micro_batches_per_slot()
        calls = 1 if ctx.use_pipeline_parallel or ctx._manual_grad_accumulation else accumulation
        reports = ctx._mpu.should_report_metrics
        pending = self.pending
        engine = ctx.models[0]
        check_steps = not ctx.use_pipeline_parallel

        def run(stream: MicroBatchStream | None, epoch_idx: int, batch_idx: int) -> Any:
            metrics: Any = {}
            for call in range(calls):
                out = train_batch(stream, epoch_idx, batch_idx)
                if reports:
                    if call < calls - 1:
                        pending.append(detach_metrics(out))
                    else:
                        metrics = out
            if check_steps and engine.micro_steps % accumulation:
                raise RuntimeError(
                    f"after batch {batch_idx} the first engine has run {engine.micro_steps} "
                    f"micro-steps, not a multiple of gradient_accumulation_steps={accumulation}: "
                    "call engine.backward() and engine.step() once per train_batch() call, or "
                    "call context.disable_auto_grad_accumulation() and run every micro-batch "
                    "of the batch in one train_batch()"
                )
            return metrics

        return run

    # -- validation ----------------------------------------------------------------------------

    _trial_base = DeepSpeedTrial

    def _full_dataset_loader(self) -> Any:
        """The chief's unsharded validation loader (built by ``Trainer._data_loaders``)."""
        stream = self.val_stream
        if stream is None:
            raise RuntimeError(
                "evaluate_full_dataset() runs on rank 0, whose ModelParallelUnit builds no "
                "data loader (should_build_data_loader=False)"
            )
        stream.loader.set_position(0, 0)
        return stream.loader.loader

    def _evaluate_one(self, evaluate: Callable[..., Any], batch: Any, batch_idx: int) -> Any:
        """``evaluate_batch`` on every rank (pipeline stages must all run); only the ranks
        that report metrics (``ModelParallelUnit.should_report_metrics``) count its output."""
        out = super()._evaluate_one(evaluate, batch, batch_idx)
        return out if self.ctx._mpu.should_report_metrics else {}  # type: ignore[attr-defined]

    def _batch_weight(self, batch: Any) -> float:
        # The records this evaluate_batch call took from the iterator; 1 when it took none
        # (ranks without data, or a call that reads elsewhere), so no weight sum is zero.
        stream = self.val_stream
        if stream is None or stream.records == 0:
            return 1.0
        records, stream.records = stream.records, 0
        return float(records)

    # -- checkpoints ---------------------------------------------------------------------------

    def trainer_state(self) -> dict[str, Any]:
        """``_Loop.trainer_state`` plus the training iterator's position."""
        state = super().trainer_state()
        state[STREAM_KEY] = self._stream_position
        return state

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Resume counters and the training iterator where the checkpoint left them."""
        super().load_trainer_state(state)
        position = state.get(STREAM_KEY)
        if self.train_stream is not None and position:
            self.train_stream.seek(position["epoch"], position["index"])

    def read_state(self, path: pathlib.Path, torch_load_kwargs: dict[str, Any]) -> dict[str, Any]:
        """The chief's ``state-dict.pth``, with this rank's RNG states as ``rng_state``."""
        state = ckpt.load_state(path, torch.device("cpu"), **torch_load_kwargs)
        ranks = state.get(RANK_RNG_KEY) or []
        rank = self.ctx.distributed.rank
        if rank < len(ranks):
            state["rng_state"] = ranks[rank]
        return state

    def apply_weights(self, state: dict[str, Any], path: pathlib.Path) -> None:
        """``trial.load(context, path)`` (every engine) and the callbacks' states.

        Raises:
            RuntimeError: the checkpoint holds another number of engines than were wrapped.
        """
        models = self.ctx.models
        saved = state.get("engines")
        if saved is not None and saved != len(models):
            raise RuntimeError(
                f"checkpoint has {saved} DeepSpeed engines but the trial wrapped {len(models)}"
            )
        self.trial.load(self.ctx, path)
        saved_callbacks = state.get("callbacks", {})
        for name, cb in self.named_callbacks.items():
            if name in saved_callbacks:
                cb.load_state_dict(saved_callbacks[name])

    def _store_checkpoint(self, steps: int) -> str | None:
        """Every rank writes into one checkpoint: the chief ``state-dict.pth`` (callbacks,
        trainer state, every rank's RNG), each rank its engine shards via ``trial.save``."""
        rng = ckpt.capture_rng_state()
        position = self.train_stream.position() if self.train_stream is not None else None
        rngs = [rng]
        if self.size > 1:
            gathered = self.ctx.distributed.allgather((rng, position))
            rngs = [g[0] for g in gathered]
            position = next((p for _, p in gathered if p is not None), None)
        self._stream_position = position
        state: dict[str, Any] = {
            "callbacks": {name: cb.state_dict() for name, cb in self.named_callbacks.items()},
            "rng_state": rng,
            RANK_RNG_KEY: rngs,
            "trainer_state": self.trainer_state(),
            "engines": len(self.ctx.models),
        }
        # Hooks run on every rank: each wrote a part of the checkpoint (as in Determined).
        for cb in self.callbacks:
            cb.on_checkpoint_save_start(state)
        metadata = ckpt.checkpoint_metadata(self.ctx, steps, {"format": "deepspeed"})
        with self.core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
            if self.is_chief:
                ckpt.save_state(path, state)
            self.trial.save(self.ctx, path)
            for cb in self.callbacks:
                cb.on_checkpoint_save(str(path))
            for cb in self.callbacks:
                cb.on_checkpoint_end(str(path))
                cb.on_checkpoint_write_end(str(path))
        if self.is_chief:
            logger.info("checkpoint %s saved at %d batches", storage_id, steps)
        return str(storage_id)
