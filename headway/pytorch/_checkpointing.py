"""Checkpoint format of a ``PyTorchTrial``: one ``state-dict.pth`` per checkpoint directory.

``state-dict.pth`` holds Determined's four keys (``models_state_dict``,
``optimizers_state_dict``, ``lr_schedulers_state_dict``, ``callbacks``; lists in wrap order),
plus ``scalers_state_dict``, ``rng_state`` and ``trainer_state`` so a paused trial resumes
bit-for-bit.
"""

from __future__ import annotations

import pathlib
import random
from typing import Any

import numpy as np
import torch

from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._context import PyTorchTrialContext

STATE_FILE = "state-dict.pth"


def capture_rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and every CUDA device) generator states."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of ``capture_rng_state`` (CUDA states are restored only when devices match).

    Generator states must be CPU ByteTensors; a checkpoint loaded with ``map_location`` on a GPU
    holds them on the GPU, so they are moved back first.
    """
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.random.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (CPU + CUDA) from ``seed``."""
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def build_state(
    context: PyTorchTrialContext,
    callbacks: dict[str, PyTorchCallback],
    trainer_state: dict[str, Any],
) -> dict[str, Any]:
    """The dict written to ``state-dict.pth``."""
    return {
        "models_state_dict": [m.state_dict() for m in context._unwrapped_models],
        "optimizers_state_dict": [o.state_dict() for o in context.optimizers],
        "lr_schedulers_state_dict": [s.state_dict() for s in context.lr_schedulers],
        "scalers_state_dict": [s.state_dict() for s in context._scalers],
        "callbacks": {name: cb.state_dict() for name, cb in callbacks.items()},
        "rng_state": capture_rng_state(),
        "trainer_state": trainer_state,
    }


def save_state(path: pathlib.Path, state: dict[str, Any]) -> None:
    """Write ``state`` as ``path/state-dict.pth``."""
    torch.save(state, path / STATE_FILE)


def load_state(path: pathlib.Path, device: torch.device) -> dict[str, Any]:
    """Read ``path/state-dict.pth`` with tensors mapped to ``device``.

    Raises ``FileNotFoundError`` naming the file when the checkpoint has none.
    """
    file = path / STATE_FILE
    if not file.exists():
        raise FileNotFoundError(f"checkpoint {path} has no {STATE_FILE}")
    # weights_only=False: optimizer and RNG states hold plain Python objects; checkpoints are
    # written by the trial itself (downloads are validated by the storage layer).
    state: dict[str, Any] = torch.load(file, map_location=device, weights_only=False)
    return state


def _check_count(kind: str, saved: list[Any], live: list[Any]) -> None:
    if len(saved) != len(live):
        raise RuntimeError(
            f"checkpoint has {len(saved)} {kind} but the trial wrapped {len(live)}; "
            "wrap the same objects in the same order as the run that saved it"
        )


def apply_weights(
    state: dict[str, Any], context: PyTorchTrialContext, callbacks: dict[str, PyTorchCallback]
) -> None:
    """Load models, optimizers, LR schedulers, scalers and callbacks from ``state``."""
    models = state.get("models_state_dict", [])
    _check_count("models", models, context._unwrapped_models)
    for model, sd in zip(context._unwrapped_models, models, strict=True):
        model.load_state_dict(sd)
    optimizers = state.get("optimizers_state_dict", [])
    _check_count("optimizers", optimizers, context.optimizers)
    for opt, sd in zip(context.optimizers, optimizers, strict=True):
        opt.load_state_dict(sd)
    schedulers = state.get("lr_schedulers_state_dict", [])
    _check_count("LR schedulers", schedulers, context.lr_schedulers)
    for sched, sd in zip(context.lr_schedulers, schedulers, strict=True):
        sched.load_state_dict(sd)
    for scaler, sd in zip(context._scalers, state.get("scalers_state_dict", []), strict=False):
        scaler.load_state_dict(sd)
    saved_callbacks = state.get("callbacks", {})
    for name, cb in callbacks.items():
        if name in saved_callbacks:
            cb.load_state_dict(saved_callbacks[name])


def checkpoint_metadata(
    context: PyTorchTrialContext, steps_completed: int, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Metadata registered with a checkpoint (``steps_completed``, ids, format, framework)."""
    meta = {
        "steps_completed": steps_completed,
        "trial_id": context.get_trial_id(),
        "run_id": context._run_id,
        "format": "pytorch",
        "framework": f"torch-{torch.__version__}",
    }
    if extra:
        meta.update(extra)
    return meta
