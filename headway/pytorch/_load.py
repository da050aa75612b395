"""Use a trained trial outside the harness: ``CheckpointLoadContext`` and
``load_trial_from_checkpoint_path`` (Determined's names and semantics, ``pytorch/_load.py``)."""

from __future__ import annotations

import importlib
import json
import logging
import pathlib
import types
import warnings
from typing import Any

import torch

from headway._import import import_from_path
from headway.core import DistributedContext
from headway.pytorch import _checkpointing as ckpt
from headway.pytorch._context import PyTorchTrialContext
from headway.pytorch._trial import PyTorchTrial

logger = logging.getLogger("headway.pytorch")


class CheckpointLoadContext(PyTorchTrialContext):
    """A ``PyTorchTrialContext`` for building a trial only to load weights into it.

    It supports wrapping and the config getters; it has no metrics, checkpoint storage or
    searcher, so it cannot be passed to ``Trainer``. ``configure_apex_amp`` returns its
    arguments unchanged here, as Determined's does outside training.

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

    def _managed_training(self) -> bool:
        return False


def _class_from_spec(spec: str) -> type[PyTorchTrial]:
    module_name, _, qualname = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, PyTorchTrial)):
        raise TypeError(f"{spec} is not a PyTorchTrial subclass")
    return obj


def load_trial_from_checkpoint_path(
    path: str | pathlib.Path,
    trial_class: type[PyTorchTrial] | None = None,
    trial_kwargs: dict[str, Any] | None = None,
    torch_load_kwargs: dict[str, Any] | None = None,
    *,
    hparams: dict[str, Any] | None = None,
    device: torch.device | None = None,
    **kwargs: Any,
) -> PyTorchTrial:
    """Build the trial a checkpoint was written by and load the checkpoint's state into it.

    Reads ``load_data.json`` (written into every checkpoint by ``Trainer.fit``): the trial class
    spec ``module:qualname``, its hyperparameters and experiment config. Without
    ``trial_class`` the class is imported from the checkpoint's ``code/`` folder with
    ``headway.import_from_path``, as Determined does.

    Arguments:
        path: a checkpoint directory, e.g. from ``client.get_checkpoint(uuid).download()``.
        trial_class: the ``PyTorchTrial`` subclass; only needed when the automatic import from
            ``code/`` cannot work (or for checkpoints without ``load_data.json``).
        trial_kwargs (dict | None): extra keyword arguments for the trial's ``__init__``.
        torch_load_kwargs (dict | None): keyword arguments for ``torch.load`` (default
            ``map_location=device``, ``weights_only=True``; ``{"weights_only": False}`` only
            for checkpoints you trust: it unpickles arbitrary objects, and so runs their code).
        hparams (dict | None): Headway extension: overrides the stored hyperparameters.
        device (torch.device | None): Headway extension: where to put the models (default:
            CUDA if available, else CPU).
        **kwargs: deprecated (FutureWarning, as in Determined): ``torch.load`` arguments.

    Returns the trial with models (in eval mode), optimizers and LR schedulers restored.

    Raises:
        ValueError: ``kwargs`` together with ``torch_load_kwargs``; no ``load_data.json`` and
            no ``trial_class``; or the class could not be imported from ``code/`` (the message
            says to pass ``trial_class``).
        FileNotFoundError: ``path`` has no ``state-dict.pth``.
        RuntimeError: the trial wraps a different number of objects than the checkpoint holds.
    """
    torch_load_kwargs = dict(torch_load_kwargs or {})
    if kwargs:
        if torch_load_kwargs:
            raise ValueError("kwargs may not be set if torch_load_kwargs is also set")
        warnings.warn(
            "passing **kwargs to load_trial_from_checkpoint_path() is deprecated; pass "
            "torch_load_kwargs={...} instead",
            FutureWarning,
            stacklevel=2,
        )
        torch_load_kwargs = dict(kwargs)
    ckpt_dir = pathlib.Path(path)
    load_file = ckpt_dir / ckpt.LOAD_DATA_FILE
    load_data: dict[str, Any] = {}
    if load_file.exists():
        load_data = json.loads(load_file.read_text(encoding="utf-8"))
        if load_data.get("trial_type") != "PyTorchTrial":
            logger.warning("checkpoint %s does not look like a PyTorchTrial checkpoint", path)
    elif trial_class is None:
        raise ValueError(
            f"checkpoint {path} has no {ckpt.LOAD_DATA_FILE}; pass trial_class= (and hparams=)"
        )
    if hparams is None:
        hparams = load_data.get("hparams") or {}
    exp_conf = load_data.get("experiment_config") or {}
    trial_kwargs = trial_kwargs or {}
    context = CheckpointLoadContext(hparams=hparams, exp_conf=exp_conf, device=device)
    if trial_class is not None:
        trial = trial_class(context, **trial_kwargs)
    else:
        spec = str(load_data.get("trial_cls_spec", ""))
        if load_data.get("trial_in_main"):
            logger.warning(
                "importing %s, which was defined in the script that trained it; define trial "
                "classes in an importable module if this fails",
                spec,
            )
        try:
            # Built inside the block, so an __init__ that imports sibling modules finds them.
            with import_from_path(ckpt_dir / ckpt.CODE_DIR):
                trial = _class_from_spec(spec)(context, **trial_kwargs)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            raise ValueError(
                f"could not import the trial class {spec!r} from {ckpt_dir / ckpt.CODE_DIR}: "
                f"{exc}; pass trial_class= instead"
            ) from exc
    torch_load_kwargs.setdefault("map_location", context.device)
    state = ckpt.load_state(ckpt_dir, context.device, **torch_load_kwargs)
    ckpt.apply_weights(state, context, {})
    for model in context.models:
        model.eval()
    return trial
