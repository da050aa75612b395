"""``DetCallback``: a ``transformers.Trainer`` reporting to Headway through the Core API.

The semantics are Determined's ``determined.transformers.DetCallback`` (its
``harness/determined/transformers/_hf_callback.py`` and ``examples/hf_trainer_api``): metrics
at the Trainer's steps, the Trainer's checkpoint folders uploaded as checkpoints, resume from
the trial's latest checkpoint, preemption, searcher operations and progress. Where Headway
differs it is said in docs/decisions/sdk.md.
"""

from __future__ import annotations

import json
import logging
import math
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any, Protocol

import transformers
from transformers import trainer_utils

from headway._info import ClusterInfo
from headway.core import (
    CheckpointContext,
    DistributedContext,
    PreemptContext,
    SearcherContext,
    SearcherOperation,
    TrainContext,
)
from headway.transformers._metrics import TRAINING, VALIDATION, metric_group, select_metrics
from headway.transformers._searcher import (
    check_searcher_length,
    required_metrics,
    trainer_length,
)

logger = logging.getLogger("headway.transformers")

USER_DATA_FILE = "my_data.json"  # Determined's name for ``user_data`` in each checkpoint


class CoreContext(Protocol):
    """What the callback uses of a Core API context: ``headway.core.Context`` (from
    ``core.init()`` or ``core_v2.init_context()``), or ``core_v2``'s singletons."""

    @property
    def train(self) -> TrainContext: ...
    @property
    def checkpoint(self) -> CheckpointContext: ...
    @property
    def preempt(self) -> PreemptContext: ...
    @property
    def searcher(self) -> SearcherContext: ...
    @property
    def distributed(self) -> DistributedContext: ...
    @property
    def info(self) -> ClusterInfo | None: ...


class DetCallback(transformers.TrainerCallback):
    """Report a ``transformers.Trainer``'s metrics and checkpoints to Headway, follow its
    searcher and stop when the trial is preempted; restore the latest checkpoint on resume.

    Add it to the Trainer's callbacks and pass ``args.resume_from_checkpoint`` to
    ``trainer.train`` (it is set here when the trial has a checkpoint to resume from)::

        with headway.core.init() as core_context:
            callback = DetCallback(core_context, training_args)
            trainer = Trainer(..., args=training_args, callbacks=[callback])
            trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    What it does, at the Trainer's events:

    - ``on_log``: a log with an ``eval_`` key is reported as ``validation`` metrics, one with
      a ``test_`` key as ``test``, any other as ``training``, at ``steps_completed =
      state.global_step``; every report also carries ``batches`` (the step) and ``epochs``
      (``state.epoch``, in place of the Trainer's rounded ``epoch``). Two logs at one step
      (the Trainer's last ``loss`` and its ``train_loss`` summary) are both reported: the
      registry merges them per metric.
    - ``on_save``: the Trainer's ``<output_dir>/checkpoint-<step>`` folder becomes a checkpoint
      (stored under the same name) with metadata ``steps_completed`` (and ``trial_id``,
      ``user_data``).
    - ``on_step_end``: ``preempt.should_preempt()`` (the trial paused, or a searcher stopping
      it) → save at this step and stop training; progress is reported.
    - ``on_epoch_end``: when training is ending, an evaluation (unless preempted or
      ``eval_strategy`` is ``no``) and a save at the last step if there was none, so the
      trial ends with a checkpoint of its final weights.
    - With ``searcher.max_length`` in the config, the trial follows
      ``core_context.searcher.operations()``: at each operation's length (in the config's
      unit, ``batches`` with ``--max_steps``, ``epochs`` with ``--num_train_epochs``) it
      evaluates, reports the searcher metric with ``op.report_completed``, and stops (with a
      save) when the searcher gives no further operation.

    Arguments:
        core_context (headway.core.Context): from ``headway.core.init()`` (managed trial,
            or local mode, where nothing is resumed and no searcher is followed) or
            ``headway.experimental.core_v2.init_context()`` (an unmanaged run).
        args (transformers.TrainingArguments): the Trainer's arguments, the same object the
            Trainer gets; ``args.resume_from_checkpoint`` is set when a checkpoint was restored.
        filter_metrics (list[str] | None): report only metrics whose names contain one of
            these strings (the searcher's ``metric`` and a ``time_metric`` are always kept);
            None reports every metric.
        user_data (dict | None): JSON-serializable data written into every checkpoint folder
            as ``my_data.json`` and into its metadata as ``user_data``.

    Raises:
        ValueError: the Trainer's ``--max_steps`` / ``--num_train_epochs`` differs from the
            searcher's ``max_length`` (or ASHA ``max_time`` in batches or epochs); later, from
            ``trainer.train()``, a validation log that lacks the searcher's metric.
    """

    def __init__(
        self,
        core_context: CoreContext,
        args: transformers.TrainingArguments,
        filter_metrics: list[str] | None = None,
        user_data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.core_context = core_context
        self.user_data = user_data
        self.info = core_context.info
        searcher = self.info.trial.config.searcher if self.info is not None else None
        self._required = required_metrics(searcher)
        # Never filter out what the searcher reads (Determined appends it too); the caller's
        # list is left as it was.
        self.filter_metrics = (
            list(filter_metrics) + self._required if filter_metrics is not None else None
        )
        self.searcher_metric: str | None = searcher.metric if searcher is not None else None
        self.last_eval_step = -1
        self.last_save = -1
        self._last_percent = 0
        self._ops: Iterator[SearcherOperation] | None = None
        self._op: SearcherOperation | None = None
        self._op_due = False  # the operation's length is reached: complete it at the next eval
        self._unit, _, _ = trainer_length(args)
        max_length = check_searcher_length(searcher, args) if searcher is not None else None
        if max_length is not None:
            self._ops = core_context.searcher.operations()
            self._op = next(self._ops, None)
        self._load_latest_checkpoint(args)

    def _load_latest_checkpoint(self, args: transformers.TrainingArguments) -> None:
        """Download the trial's latest checkpoint into ``args.output_dir`` and point
        ``args.resume_from_checkpoint`` at its ``checkpoint-<step>`` folder."""
        latest = self.info.latest_checkpoint if self.info is not None else None
        if latest is None:
            return
        if getattr(args, "overwrite_output_dir", False) is True:
            logger.info("overwrite_output_dir=True: not restoring checkpoint %s", latest)
            return
        output_dir = _output_dir(args)
        self.core_context.checkpoint.download(latest, output_dir)
        steps = self.info.latest_checkpoint_steps if self.info is not None else None
        folder = output_dir / f"{trainer_utils.PREFIX_CHECKPOINT_DIR}-{steps}"
        path: str | None = str(folder)
        if not folder.is_dir():  # the trial's info did not say the checkpoint's steps
            path = trainer_utils.get_last_checkpoint(str(output_dir))  # type: ignore[no-untyped-call]
        if path is None:
            raise FileNotFoundError(
                f"checkpoint {latest} holds no Trainer checkpoint folder "
                f"({trainer_utils.PREFIX_CHECKPOINT_DIR}-<step>)"
            )
        args.resume_from_checkpoint = path
        logger.info("resuming from checkpoint %s (%s)", latest, path)

    def on_log(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not logs:
            return
        group = metric_group(logs)
        metrics = select_metrics(logs, self.filter_metrics, state.global_step, state.epoch)
        if group == VALIDATION:
            self.last_eval_step = state.global_step
            missing = [m for m in self._required if m not in metrics]
            if missing:
                raise ValueError(
                    f"the searcher reads {', '.join(missing)} from the validation metrics, but "
                    f"the Trainer's evaluation logged only {', '.join(sorted(logs))}: set "
                    "searcher.metric (and time_metric) to names it logs, e.g. eval_loss"
                )
        if state.is_world_process_zero:
            train = self.core_context.train
            if group == TRAINING:
                train.report_training_metrics(steps_completed=state.global_step, metrics=metrics)
            elif group == VALIDATION:
                train.report_validation_metrics(steps_completed=state.global_step, metrics=metrics)
            else:
                train.report_metrics(group, steps_completed=state.global_step, metrics=metrics)
        if group == VALIDATION and self._op_due:
            self._complete_operation(metrics, state, control)

    def _complete_operation(
        self,
        metrics: dict[str, Any],
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
    ) -> None:
        assert self._op is not None and self._ops is not None
        if self.core_context.distributed.rank == 0:
            value = metrics[self.searcher_metric] if self.searcher_metric else math.nan
            self._op.report_completed(value)
        self._op_due = False
        self._op = next(self._ops, None)  # a collective: every rank asks
        if self._op is None:  # the searcher is done with this trial
            control.should_training_stop = True
            if state.global_step > self.last_save:
                control.should_save = True

    def on_save(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        self.last_save = state.global_step
        name = f"{trainer_utils.PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        folder = _output_dir(args) / name
        dist = self.core_context.distributed
        metadata: dict[str, Any] = {"steps_completed": state.global_step}
        if self.info is not None:
            metadata["trial_id"] = self.info.trial.trial_id
        if self.user_data is not None:
            metadata["user_data"] = self.user_data
            if state.is_world_process_zero:
                (folder / USER_DATA_FILE).write_text(json.dumps(self.user_data))
        checkpoint = self.core_context.checkpoint
        if dist.size == 1:
            with checkpoint.store_path(metadata) as (path, _):
                shutil.copytree(folder, path / name)
            return
        # Every rank reached on_save, so every rank's files (DeepSpeed shards) are written when
        # the chief copies the folder; the chief alone copies it (the folder as it sees it).
        with checkpoint.store_path(metadata if dist.rank == 0 else {}, shard=True) as (path, _):
            if dist.rank == 0:
                shutil.copytree(folder, path / name)

    def on_step_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        op = self._op
        if op is not None and self._unit == "batches":
            if not self._op_due and state.global_step >= op.length:
                self._op_due = True
                control.should_evaluate = True
            elif state.is_world_process_zero and not self._op_due:
                op.report_progress(state.global_step)
        elif state.is_world_process_zero and args.max_steps > 0:
            # At most one progress report per percent (Determined's rule).
            percent = int(100 * state.global_step / args.max_steps)
            if percent > self._last_percent:
                self._last_percent = percent
                self.core_context.train.report_progress(min(1.0, percent / 100))
        if self.core_context.preempt.should_preempt():
            control.should_training_stop = True
            if state.global_step > self.last_save:
                control.should_save = True

    def on_epoch_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        epoch = state.epoch or 0.0
        op = self._op
        if op is not None and self._unit == "epochs" and not self._op_due:
            if epoch >= op.length - 1e-9:
                self._op_due = True
                control.should_evaluate = True
            elif state.is_world_process_zero:
                op.report_progress(epoch)
        if control.should_training_stop:
            is_end = True
        elif args.max_steps > 0:
            is_end = state.global_step >= args.max_steps
        else:
            is_end = epoch >= args.num_train_epochs - 1e-9
        if is_end:
            preempted = self.core_context.preempt.should_preempt()
            strategy = getattr(args, "eval_strategy", "no")
            evaluates = getattr(strategy, "value", strategy) != "no"
            if state.global_step > self.last_eval_step and evaluates and not preempted:
                control.should_evaluate = True
            if state.global_step > self.last_save:
                control.should_save = True
        if state.is_world_process_zero and args.max_steps <= 0 and self._op is None:
            self.core_context.train.report_progress(min(1.0, epoch / args.num_train_epochs))

    def on_train_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if self._op is not None and not self.core_context.preempt.should_preempt():
            logger.warning(
                "training ended at step %d before the searcher's operation of length %d was "
                "completed (no evaluation there?)",
                state.global_step,
                self._op.length,
            )


def _output_dir(args: transformers.TrainingArguments) -> pathlib.Path:
    # TrainingArguments defaults output_dir to "trainer_output" when it is left unset.
    return pathlib.Path(args.output_dir or "trainer_output")
