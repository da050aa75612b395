"""Checkpoint format of a ``PyTorchTrial``.

Each checkpoint directory holds:

- ``state-dict.pth``: Determined's four keys (``models_state_dict``, ``optimizers_state_dict``,
  ``lr_schedulers_state_dict``, ``callbacks``; lists in wrap order), plus
  ``scalers_state_dict``, ``rng_state`` and ``trainer_state`` so a paused trial resumes
  bit-for-bit;
- ``load_data.json``: Determined's file for loading the trial outside the harness
  (``trial_type``, ``experiment_config``, ``hparams``, ``trial_cls_spec`` = ``module:qualname``,
  ``is_trainer``, ``trial_in_main``);
- ``code/``: the trial's model code, as Determined's ``util.write_user_code`` saves it;
- ``tensorboard/``: the trial's TensorBoard files (``headway.pytorch._tensorboard``);
- ``metadata.json`` (written by ``core.checkpoint.store_path``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import pickle
import random
import sys
import tempfile
from typing import Any

import numpy as np
import torch

from headway.pytorch import _tensorboard
from headway.pytorch._callback import PyTorchCallback
from headway.pytorch._code_snapshot import CodeSnapshot, model_code_root, snapshot_model_code
from headway.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("headway.pytorch")

STATE_FILE = "state-dict.pth"
LOAD_DATA_FILE = "load_data.json"
CODE_DIR = "code"

TRUST_PICKLES_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
"""PyTorch's own switch (>= 2.6) back to ``weights_only=False``; Headway honours it too."""


def capture_rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and every CUDA device) generator states.

    NumPy's state is stored as ``(name, keys tensor, pos, has_gauss, cached_gaussian)``: plain
    values and a tensor, which ``torch.load(weights_only=True)`` reads without allow-listing
    NumPy's pickle functions.
    """
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    keys = np.asarray(keys, dtype=np.int64)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys), pos, has_gauss, cached),
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
    name, keys, *rest = state["numpy"]
    if isinstance(keys, torch.Tensor):
        keys = keys.cpu().numpy().astype(np.uint32)
    np.random.set_state((name, keys, *rest))
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


def _numpy_rng_globals() -> list[Any]:
    """What a NumPy RNG state saved as an ``ndarray`` (older checkpoints) needs
    under ``weights_only=True``: array reconstruction and the uint32 dtype, no object arrays."""
    multiarray = getattr(np, "_core", None) or np.core
    return [
        multiarray.multiarray._reconstruct,
        np.ndarray,
        np.dtype,
        type(np.dtype(np.uint32)),
    ]


def trust_pickles_by_default() -> bool:
    """True when ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is ``1``/``true`` (PyTorch's opt-out)."""
    return os.environ.get(TRUST_PICKLES_ENV, "").strip().lower() in ("1", "true", "yes")


def load_state(
    path: pathlib.Path, device: torch.device, **torch_load_kwargs: Any
) -> dict[str, Any]:
    """Read ``path/state-dict.pth`` with tensors mapped to ``device``.

    Loads with ``torch.load(weights_only=True)`` (PyTorch >= 2.6's default): tensors, state
    dicts and plain Python values only, so a planted pickle cannot run code in this process.
    ``torch_load_kwargs`` override the arguments (``map_location=device``, ``weights_only``);
    ``torch_load_kwargs={"weights_only": False}``, or ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` in
    the environment, opt in to full unpickling for checkpoints you trust (e.g. callbacks that
    save custom objects).

    Raises:
        FileNotFoundError: naming the file when the checkpoint has none.
        pickle.UnpicklingError: the file holds objects ``weights_only`` loading refuses; the
            message names the file and the opt-in.
    """
    file = path / STATE_FILE
    if not file.exists():
        raise FileNotFoundError(f"checkpoint {path} has no {STATE_FILE}")
    kwargs: dict[str, Any] = {
        "map_location": device,
        "weights_only": not trust_pickles_by_default(),
    }
    kwargs.update(torch_load_kwargs)
    if not kwargs["weights_only"]:
        state: dict[str, Any] = torch.load(file, **kwargs)
        return state
    try:
        with _allow(_numpy_rng_globals()):
            state = torch.load(file, **kwargs)
    except pickle.UnpicklingError as exc:
        reason = next((line for line in str(exc).splitlines() if "GLOBAL" in line), str(exc))
        raise pickle.UnpicklingError(
            f"{file} holds Python objects that torch.load(weights_only=True) refuses to "
            f"unpickle ({reason.strip()}). Load it only if you trust whoever wrote it: pass "
            f"torch_load_kwargs={{'weights_only': False}} or set {TRUST_PICKLES_ENV}=1."
        ) from exc
    return state


def _allow(globals_: list[Any]) -> Any:
    """``torch.serialization.safe_globals`` (PyTorch >= 2.5), else a no-op context."""
    safe = getattr(torch.serialization, "safe_globals", None)
    return safe(globals_) if safe is not None else contextlib.nullcontext()


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


# -- load data and model code -------------------------------------------------------------------


def trial_class_spec(trial_cls: type) -> tuple[str, bool]:
    """``("module:qualname", trial_in_main)`` for ``trial_cls``, as Determined stores it.

    A class defined in the script being run (``__main__``) is named after the script's file, so
    ``load_trial_from_checkpoint_path`` can import it from ``code/`` (Determined does the same
    and warns when loading).
    """
    module = trial_cls.__module__
    in_main = module == "__main__"
    if in_main:
        main_file = getattr(sys.modules["__main__"], "__file__", None)
        module = pathlib.Path(main_file).stem if main_file else ""
    return f"{module}:{trial_cls.__qualname__}", in_main


def load_data(context: PyTorchTrialContext, trial_cls: type) -> dict[str, Any]:
    """The content of ``load_data.json`` (Determined's keys and meanings)."""
    spec, in_main = trial_class_spec(trial_cls)
    return {
        # "DeepSpeedTrial" for headway.pytorch.deepspeed trials (Determined's value too).
        "trial_type": getattr(trial_cls, "_trial_type_name", "PyTorchTrial"),
        "experiment_config": context.get_experiment_config(),
        "hparams": context.get_hparams(),
        "trial_cls_spec": spec,
        "is_trainer": True,
        "trial_in_main": in_main,
    }


class CheckpointFiles:
    """Writes ``load_data.json``, ``code/`` and ``tensorboard/`` into each checkpoint of a fit.

    ``install()`` registers ``write`` with the Core API checkpoint context, which calls it on the
    chief inside ``store_path`` after the trial's state is written; ``close()`` unregisters it
    and removes the code snapshot.

    Arguments:
        context (PyTorchTrialContext): the trial's context.
        trial_cls (type): the ``PyTorchTrial`` subclass being trained.
    """

    def __init__(self, context: PyTorchTrialContext, trial_cls: type) -> None:
        self._context = context
        self._load_data = load_data(context, trial_cls)
        self._code: CodeSnapshot | None = None
        self._remove: Any = None
        if context.distributed.rank != 0:
            return  # only the chief writes checkpoints
        root = model_code_root(trial_cls)
        if root is not None:
            exclude: list[pathlib.Path] = [context.get_tensorboard_path()]
            base = getattr(context._core.checkpoint.storage_manager, "base_path", None)
            if base is not None:
                exclude.append(pathlib.Path(base))
            if root.resolve() == pathlib.Path(tempfile.gettempdir()).resolve():
                root = None  # a script in /tmp itself: too much unrelated content to copy
            else:
                self._code = snapshot_model_code(root, exclude)

    def install(self) -> None:
        """Start adding the files to every checkpoint the core context stores."""
        self._remove = self._context._core.checkpoint._add_file_writer(self.write)

    def write(self, path: pathlib.Path) -> None:
        """Write the files into the checkpoint folder ``path``.

        ``tensorboard/`` is written by the Core API's own file writer
        (``core._tensorboard.TensorboardFiles``), which flushes the trial's writer first.
        """
        with open(path / LOAD_DATA_FILE, "w", encoding="utf-8") as fh:
            json.dump(self._load_data, fh, default=str)
        if self._code is not None:
            self._code.write_into(path / CODE_DIR)

    def close(self) -> None:
        """Stop adding files and delete the code snapshot."""
        if self._remove is not None:
            self._remove()
            self._remove = None
        if self._code is not None:
            self._code.remove()
            self._code = None


def restore_tensorboard(path: pathlib.Path, context: PyTorchTrialContext) -> None:
    """On resume: copy the checkpoint's ``tensorboard/`` files into the trial's folder."""
    if (path / _tensorboard.TENSORBOARD_DIR).is_dir():
        n = _tensorboard.restore_from_checkpoint(path, context.get_tensorboard_path())
        logger.debug("restored %d TensorBoard files from %s", n, path)
