"""``PyTorchTrial``: the class users subclass (Determined's ``determined.pytorch.PyTorchTrial``)."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._dataloader import DataLoader
from headway.pytorch._metrics import Reducer

if TYPE_CHECKING:
    from headway.pytorch._context import PyTorchTrialContext

TorchData = dict[str, torch.Tensor] | list[torch.Tensor] | tuple[torch.Tensor, ...] | torch.Tensor
"""A batch: a tensor, or a (nested) dict / list / tuple of tensors or ndarrays."""


class PyTorchTrial(abc.ABC):
    """Subclass this to train a PyTorch model with the Headway harness.

    ``__init__(context)`` builds and wraps models, optimizers and LR schedulers through the
    ``PyTorchTrialContext``. Required: ``train_batch``, ``build_training_data_loader``,
    ``build_validation_data_loader``, and one of ``evaluate_batch`` / ``evaluate_full_dataset``.
    Semantics follow Determined's PyTorchTrial API (docs.determined.ai, "PyTorch API").
    """

    @abc.abstractmethod
    def __init__(self, context: PyTorchTrialContext) -> None:
        """Build models / optimizers with ``context.wrap_*``; keep ``context`` as ``self.context``."""

    @abc.abstractmethod
    def train_batch(self, batch: TorchData, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        """Train on one batch (already on ``context.device``) and return its metrics.

        Arguments:
            batch: what the training DataLoader yielded.
            epoch_idx (int): 0-based epoch of this batch.
            batch_idx (int): 0-based index of this batch counted over the whole trial.

        Returns a dict of metric name -> tensor / number / ndarray (or nested dict); the harness
        averages them over each reporting period.
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> DataLoader:
        """Return the training ``headway.pytorch.DataLoader`` (per-slot batch size)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> DataLoader:
        """Return the validation ``headway.pytorch.DataLoader``."""

    def evaluate_batch(self, batch: TorchData, batch_idx: int) -> dict[str, Any]:
        """Compute validation metrics of one batch (``batch_idx`` is optional in overrides).

        Metrics are combined over batches with ``evaluation_reducer()`` (default: mean
        weighted by ``get_batch_length(batch)``). Runs under ``torch.no_grad()`` with models in
        eval mode.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def evaluate_full_dataset(
        self, data_loader: torch.utils.data.DataLoader[Any]
    ) -> dict[str, Any]:
        """Alternative to ``evaluate_batch``: validate over the whole (plain torch) loader."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement evaluate_batch() or evaluate_full_dataset()"
        )

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch`` metrics are combined: one ``Reducer`` or one per metric name."""
        return Reducer.AVG

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """Return named callbacks; the names key their state in checkpoints."""
        return {}

    def get_batch_length(self, batch: Any) -> int:
        """Number of records in ``batch``: the first dimension of its first tensor / ndarray.

        Override for batches where that is not the record count. Raises ``ValueError`` when the
        batch holds no tensor.
        """
        length = _first_length(batch)
        if length is None:
            raise ValueError(
                f"cannot find the length of a {type(batch).__name__} batch; "
                "override PyTorchTrial.get_batch_length()"
            )
        return length


def _first_length(batch: Any) -> int | None:
    if isinstance(batch, torch.Tensor | np.ndarray):
        return int(batch.shape[0]) if batch.ndim > 0 else 1
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, list | tuple):
        for item in batch:
            length = _first_length(item)
            if length is not None:
                return length
    return None
