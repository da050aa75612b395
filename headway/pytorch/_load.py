"""Use a trained trial outside the harness: ``CheckpointLoadContext`` and
``load_trial_from_checkpoint_path`` (Determined's names, ``determined.pytorch``)."""

from __future__ import annotations

import pathlib
import types
from typing import Any

import torch

from headway.core import DistributedContext
from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._trial import PyTorchTrial


class CheckpointLoadContext(PyTorchTrialContext):
    """A ``PyTorchTrialContext`` for building a trial only to load weights into it.

    It supports wrapping and the config getters; it has no metrics, checkpoint storage or
    searcher, so it cannot be passed to ``Trainer``.

    Arguments:
        hparams (dict | None): what ``get_hparam()`` returns.
        exp_conf (dict | None): what ``get_experiment_config()`` returns.
        device (torch.device | None): where ``wrap_model`` puts models (default: CUDA if
            available, else CPU).
    """

    def __init__(
        self,
        hparams: dict[str, Any] | None = None,
        exp_conf: dict[str, Any] | None = None,
        device: torch.device | None = None,
    ) -> None:
        core_stub = types.SimpleNamespace(distributed=DistributedContext.single(), info=None)
        super().__init__(
            core_stub,
            hparams=dict(hparams or {}),
            exp_conf=dict(exp_conf or {}),
            trial_seed=0,
            trial_id=-1,
            run_id=0,
            device=device,
        )


def load_trial_from_checkpoint_path(
    path: str | pathlib.Path,
    trial_class: type[PyTorchTrial],
    hparams: dict[str, Any] | None = None,
    trial_kwargs: dict[str, Any] | None = None,
    device: torch.device | None = None,
) -> PyTorchTrial:
    """Instantiate ``trial_class`` with a ``CheckpointLoadContext`` and load a checkpoint's state.

    Arguments:
        path: a checkpoint directory (holding ``state-dict.pth``), e.g. downloaded with
            ``headway checkpoint download``.
        trial_class: the ``PyTorchTrial`` subclass that produced the checkpoint.
        hparams (dict | None): the trial's hyperparameters (needed if ``__init__`` reads them).
        trial_kwargs (dict | None): extra keyword arguments for ``trial_class``.
        device: where to load tensors (default: CUDA if available, else CPU).

    Returns the trial with models (in eval mode), optimizers and LR schedulers restored. Raises
    ``FileNotFoundError`` when ``path`` has no ``state-dict.pth`` and ``RuntimeError`` when the
    trial wraps a different number of objects than the checkpoint holds.
    """
    context = CheckpointLoadContext(hparams=hparams, device=device)
    trial = trial_class(context, **(trial_kwargs or {}))
    state = ckpt.load_state(pathlib.Path(path), context.device)
    ckpt.apply_weights(state, context, {})
    for model in context.models:
        model.eval()
    return trial
