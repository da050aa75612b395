"""``PyTorchCallback``: hooks into the harness loop (Determined's ``pytorch.PyTorchCallback``)."""

from __future__ import annotations

from typing import Any


class PyTorchCallback:
    """Override any of these hooks and return instances from ``PyTorchTrial.build_callbacks()``.

    Every hook is a no-op by default. ``state_dict()`` / ``load_state_dict()`` let a callback
    keep state across pause/resume; it is stored under ``"callbacks"`` in ``state-dict.pth``
    keyed by the name used in ``build_callbacks()``. Hook names and meanings follow Determined's
    ``determined.pytorch.PyTorchCallback``.
    """

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        """Called once before training; ``first_batch_idx`` is 0 unless resuming."""

    def on_training_start(self) -> None:
        """Called once when the training loop starts (after any checkpoint was loaded)."""

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        """Called before the first batch of each training epoch (0-based ``epoch_idx``)."""

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        """Called after the last batch of each training epoch."""

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        """Called after each training-metrics report with the averaged and per-batch metrics."""

    def on_validation_start(self) -> None:
        """Called before each validation pass (models already in eval mode)."""

    def on_validation_epoch_start(self) -> None:
        """Called before the first ``evaluate_batch`` of a validation pass (not called with
        ``evaluate_full_dataset``)."""

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        """Called after the last ``evaluate_batch`` of a validation pass, before reduction.

        ``outputs`` holds this rank's ``evaluate_batch`` dicts in order, tensors as NumPy
        arrays (as Determined passes them). Not called with ``evaluate_full_dataset``.
        """

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        """Called after each validation pass with the reduced validation metrics (every rank)."""

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        """Called on the chief with the state dict about to be written as ``state-dict.pth``;
        changes made to ``checkpoint`` are saved."""

    def on_checkpoint_save(self, checkpoint_dir: str) -> None:
        """Headway's own hook: called after ``state-dict.pth`` was written into
        ``checkpoint_dir`` (chief only), before ``on_checkpoint_end`` / ``on_checkpoint_write_end``."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Deprecated in Determined for ``on_checkpoint_write_end`` (a ``FutureWarning`` is
        emitted when overridden); called right before it, on the chief only."""

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        """Called on the chief after every file of the checkpoint is written to
        ``checkpoint_dir``, before it is uploaded."""

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        """Called on every rank after a checkpoint was stored and registered as ``uuid``."""

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        """Called with the loaded ``state-dict.pth`` dict before any state is restored from it;
        changes made to ``checkpoint`` are what gets restored."""

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        """Headway's own hook: called after the trial's state was restored from
        ``checkpoint_dir``."""

    def on_trial_shutdown(self) -> None:
        """Called once when the trainer exits (completed, preempted or failed)."""

    def state_dict(self) -> dict[str, Any]:
        """Return this callback's state to checkpoint (default: empty)."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state returned earlier by ``state_dict()``."""
