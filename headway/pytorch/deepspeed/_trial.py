"""``DeepSpeedTrial``: the class users subclass (Determined's
``determined.pytorch.deepspeed.DeepSpeedTrial``)."""

from __future__ import annotations

import abc
import pathlib
from collections.abc import Iterator
from typing import Any

import torch

from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._metrics import Reducer
from headway.pytorch._trial import TorchData, _first_length
from headway.pytorch.deepspeed._context import DeepSpeedTrialContext


class DeepSpeedTrial(abc.ABC):
    """Subclass this to train DeepSpeed engines with the Headway harness.

    ``__init__(context)`` builds the model(s), calls ``deepspeed.initialize`` and registers each
    engine with ``context.wrap_model_engine``. ``train_batch`` and ``evaluate_batch`` receive an
    *iterator* over the data loader (not a batch): they take micro-batches from it with
    ``next()``, or hand it to a pipeline engine's ``train_batch`` / ``eval_batch``.

    One harness batch is ``train_batch_size`` records (micro-batch x gradient accumulation x
    data-parallel size); the harness calls ``train_batch`` ``gradient_accumulation_steps``
    times per batch (once with a ``PipelineEngine`` or after
    ``context.disable_auto_grad_accumulation()``). Semantics follow Determined's DeepSpeedTrial
    API (docs.determined.ai, "DeepSpeed API").

    .. code::

        class MyTrial(DeepSpeedTrial):
            def __init__(self, context):
                self.context = context
                model = build_model()
                engine, _, _, _ = deepspeed.initialize(
                    model=model, model_parameters=model.parameters(), config=ds_config
                )
                self.engine = context.wrap_model_engine(engine)

            def train_batch(self, dataloader_iter, epoch_idx, batch_idx):
                x, y = self.context.to_device(next(dataloader_iter))
                loss = loss_fn(self.engine(x), y)
                self.engine.backward(loss)
                self.engine.step()
                return {"loss": loss}
    """

    _trial_type_name = "DeepSpeedTrial"  # load_data.json's trial_type
    trial_context_class = DeepSpeedTrialContext

    @abc.abstractmethod
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        """Build engines with ``deepspeed.initialize`` and ``context.wrap_model_engine``; set
        ``context.set_mpu`` / ``disable_*`` here if needed."""

    @abc.abstractmethod
    def train_batch(
        self, dataloader_iter: Iterator[TorchData] | None, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Train one micro-batch (or, with a pipeline engine or manual accumulation, a batch).

        Arguments:
            dataloader_iter (Iterator | None): the training data, one micro-batch per
                ``next()`` (batches as the loader yields them, on the CPU: use
                ``context.to_device``). It runs on across epochs. None on ranks that build no
                data loader (``ModelParallelUnit.should_build_data_loader``).
            epoch_idx (int): 0-based epoch of this batch (epochs are
                ``len(loader) // gradient_accumulation_steps`` batches).
            batch_idx (int): 0-based batch index over the whole trial.

        Returns the metrics (a dict, or a loss tensor meaning ``{"loss": tensor}``); they are
        averaged over micro-batches, ranks and each reporting period. Ranks whose MPU says
        ``should_report_metrics=False`` may return anything.
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> Any:
        """Return the training ``headway.pytorch.DataLoader`` with batch size
        ``context.get_train_micro_batch_size_per_gpu()`` (any sized iterable after
        ``context.disable_dataset_reproducibility_checks()``). Called only on ranks whose MPU
        builds data loaders; it is sharded by the data-parallel rank."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> Any:
        """Return the validation ``headway.pytorch.DataLoader`` (same rules as training; with a
        pipeline engine each ``evaluate_batch`` call consumes ``gradient_accumulation_steps``
        of its batches)."""

    def evaluate_batch(
        self, dataloader_iter: Iterator[TorchData] | None, batch_idx: int
    ) -> dict[str, Any]:
        """Compute validation metrics from the next batch(es) of ``dataloader_iter``.

        Called under ``torch.no_grad()`` with the engines in eval mode, ``len(loader)`` times
        per validation (``len(loader) // gradient_accumulation_steps`` with a pipeline engine;
        the smallest count over data-parallel ranks). ``batch_idx`` may be left out of an
        override. Metrics are combined with ``evaluation_reducer()``; ``AVG`` weighs each call
        by the records it took from the iterator.

        Define this or ``evaluate_full_dataset``, not both (``fit()`` raises ``TypeError``).
        Determined declares it abstract, which leaves its ``evaluate_full_dataset`` unreachable;
        Headway lets either one be the trial's validation, as ``PyTorchTrial`` does.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def evaluate_full_dataset(
        self, data_loader: torch.utils.data.DataLoader[Any]
    ) -> dict[str, Any]:
        """Alternative to ``evaluate_batch``: validate over the whole validation set at once.

        Runs on the chief (rank 0) alone, under ``torch.no_grad()`` with the engines in eval
        mode, and gets the loader ``build_validation_data_loader()`` returned there, unsharded
        (a ``headway.pytorch.DataLoader`` as its plain torch loader); the other ranks wait and
        receive its metrics, which are reported as returned (a dict of JSON-serialisable
        values). Determined's ``DeepSpeedTrial.evaluate_full_dataset``.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """Return named ``PyTorchCallback``s; the names key their state in checkpoints."""
        return {}

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch`` metrics are combined: one ``Reducer`` or one per name."""
        return Reducer.AVG

    def save(self, context: DeepSpeedTrialContext, path: pathlib.Path) -> None:
        """Save every engine into the checkpoint folder ``path``; runs on every rank.

        Default: ``engine.save_checkpoint(path, tag=f"model{i}")`` for the i-th wrapped engine
        (each rank writes its own ZeRO shards). Override for custom layouts, and ``load`` too.
        """
        engines: list[Any] = list(context.models)
        for i, engine in enumerate(engines):
            engine.save_checkpoint(str(path), tag=f"model{i}")

    def load(self, context: DeepSpeedTrialContext, load_path: pathlib.Path) -> None:
        """Load every engine from the checkpoint folder ``load_path``; runs on every rank.

        Default: ``engine.load_checkpoint(load_path, tag=f"model{i}")`` (weights, optimizer and
        LR-scheduler states). DeepSpeed reads its own files with ``torch.load(weights_only=
        False)``: load only checkpoints you trust.

        Raises:
            RuntimeError: DeepSpeed found no checkpoint for an engine or failed an assertion
                while loading it (the message names the engine's folder).
        """
        engines: list[Any] = list(context.models)
        for i, engine in enumerate(engines):
            folder = pathlib.Path(load_path) / f"model{i}"
            try:
                loaded, _ = engine.load_checkpoint(str(load_path), tag=f"model{i}")
            except AssertionError as exc:
                raise RuntimeError(f"DeepSpeed could not load {folder}: {exc}") from exc
            if loaded is None:
                raise RuntimeError(f"DeepSpeed found no checkpoint of engine {i} in {folder}")

    def get_batch_length(self, batch: Any) -> int:
        """Number of records in a micro-batch: the first dimension of its first tensor.

        Used to weigh validation metrics; override for custom batch types. Raises
        ``ValueError`` when the batch holds no tensor.
        """
        length = _first_length(batch)
        if length is None:
            raise ValueError(
                f"cannot find the length of a {type(batch).__name__} batch; "
                "override DeepSpeedTrial.get_batch_length()"
            )
        return length
