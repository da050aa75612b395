"""``HeadwayLogger``: a ``lightning.pytorch.loggers.Logger`` that reports into a Headway trial.

A thin layer over the Core API (as Determined's integrations are): metrics go through
``core_context.train``, checkpoint files through ``core_context.checkpoint``. Its peers are
Lightning's ``WandbLogger`` and ``MLFlowLogger`` (``log_model``, ``after_save_checkpoint``).
"""

from __future__ import annotations

import logging
import os
import weakref
from argparse import Namespace
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.logger import _convert_params, _flatten_dict, _sanitize_params
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger
from lightning.pytorch.utilities import rank_zero_only

from headway.client import RegistryAPI
from headway.core import Context
from headway.experimental import core_v2
from headway.lightning._checkpoints import store_file
from headway.lightning._names import metric_group
from headway.lightning._unmanaged import start_run

logger = logging.getLogger("headway.lightning")


class HeadwayLogger(Logger):
    """Report a Lightning ``Trainer``'s metrics, hparams and checkpoints into a Headway trial.

    .. code::

        with core.init() as core_context:
            trainer = L.Trainer(logger=HeadwayLogger(core_context),
                                callbacks=[HeadwayCallback(core_context)])
            trainer.fit(model, ckpt_path=latest_checkpoint_path(core_context))

    - **Metrics**: each ``log_metrics`` call is reported at ``steps_completed`` =
      ``trainer.global_step`` (optimizer steps: batches, or batches / accumulate_grad_batches),
      so the metrics of the k-th batch, the validation after it and a checkpoint saved there
      share step k (Lightning's own logging step lags one behind for step-level metrics).
      Names stay as logged (``val_loss``, ``train_loss_step``, ``train_loss_epoch``); the
      group comes from the prefix (``headway.lightning.metric_group``, the MLflow-compatible
      API's): ``val_``, ``val/``, ``eval_``, ``eval/``, ``validation_``, ``validation/`` ->
      ``validation``; ``test_``, ``test/`` -> ``test``; else ``training``. Lightning's
      ``epoch`` entry becomes the report's ``epoch``. Two calls at one step merge per metric
      in the registry.
    - **hparams** (``log_hyperparams``, e.g. from ``save_hyperparameters()``): flattened with
      ``/`` and kept in the metadata of every checkpoint this logger registers
      (``metadata["lightning"]["hparams"]``). A managed trial's own hparams are the
      searcher's and stay as they are.
    - **Checkpoints** (``log_model=True``): every file a ``ModelCheckpoint`` saves becomes a
      Headway checkpoint as soon as it is saved (as ``WandbLogger(log_model="all")``), with
      ``steps_completed`` = the global step of the save and the monitored metric
      (``metadata["lightning"]``: ``file``, ``monitor``, ``score``, ``mode``). Files the
      callback later deletes (``save_top_k``) stay registered: the experiment's
      ``checkpoint_storage`` policy decides which Headway checkpoints to keep.
    - **Ranks**: only rank zero reports (``rank_zero_only``), as the Core API's chief does.

    - **Without a context** (``HeadwayLogger()``, ``HeadwayLogger(config=core_v2.Config(...))``)
      the logger starts its own run on first use (``core_v2.init_context``: an unmanaged
      trial outside the cluster, the trial itself inside a managed one), with the logged
      hparams as the trial's hparams when ``config.hparams`` is unset, and ends it in
      ``finalize`` (COMPLETED; ERROR when Lightning reports the fit ``failed``). A later use
      starts another run (the same trial again with ``external_trial_id``). Rank zero alone
      starts it, so under DDP pass a context made on every rank if ``HeadwayCallback`` is used.

    Arguments:
        core_context (headway.core.Context | None): the trial's Core API (``core.init()``, or
            ``headway.experimental.core_v2.init_context()``); None: the logger starts a run.
        config (core_v2.Config | None), client (RegistryAPI | None): the run the logger starts
            (``core_v2.init_context``'s ``config`` and ``client``); only without a context.
        log_model (bool): register ``ModelCheckpoint`` files as Headway checkpoints (default
            True).

    Raises:
        TypeError: when ``core_context`` is not a ``headway.core.Context``.
        ValueError: ``config`` or ``client`` given with a ``core_context``.
    """

    def __init__(
        self,
        core_context: Context | None = None,
        *,
        config: core_v2.Config | None = None,
        client: RegistryAPI | None = None,
        log_model: bool = True,
    ) -> None:
        super().__init__()
        if core_context is not None and not isinstance(core_context, Context):
            raise TypeError(
                "HeadwayLogger(core_context): expected the headway.core.Context of core.init(), "
                f"got {type(core_context).__name__}"
            )
        if core_context is not None and (config is not None or client is not None):
            raise ValueError(
                "HeadwayLogger: config and client describe a run the logger starts itself; "
                "they cannot be given with a core_context"
            )
        self._core = core_context
        self._owns_run = core_context is None
        self._config = config
        self._client = client
        self._log_model = log_model
        self._hparams: dict[str, Any] = {}
        # (path, mtime_ns) of files registered already: last.ckpt saved again is a new one.
        self._registered: dict[tuple[str, int], str] = {}
        self._last_step = 0
        self._trainer: weakref.ref[pl.Trainer] | None = None
        self._warned_no_trainer = False

    @property
    def name(self) -> str:
        """``experiment-<id>`` of the trial's experiment; ``headway`` in local mode or before
        the logger's own run started."""
        info = self._core.info if self._core is not None else None
        return f"experiment-{info.trial.experiment_id}" if info is not None else "headway"

    @property
    def version(self) -> str:
        """``trial-<id>``; ``local`` in local mode or before the logger's own run started."""
        info = self._core.info if self._core is not None else None
        return f"trial-{info.trial.trial_id}" if info is not None else "local"

    @property
    def experiment(self) -> Context | None:
        """The Core API context reports go through (what ``WandbLogger.experiment`` is to W&B).

        None while a run the logger starts itself has not started: it starts at the first
        metric report or checkpoint (after Lightning logged the hparams it is created with),
        not when Lightning touches this property at setup, and on rank zero only.
        """
        return self._core

    def _context(self) -> Context:
        if self._core is None:
            self._core = start_run(self._config, self._client, self._hparams)
        return self._core

    @property
    def hparams(self) -> dict[str, Any]:
        """The hparams ``log_hyperparams`` recorded so far (flattened, a copy)."""
        return dict(self._hparams)

    @property
    def registered_checkpoints(self) -> dict[str, str]:
        """Lightning file path -> Headway ``storage_id`` of the files registered so far (the
        latest registration of a path that was saved several times)."""
        return {path: storage_id for (path, _), storage_id in self._registered.items()}

    def attach(self, trainer: pl.Trainer) -> None:
        """Read ``steps_completed`` from ``trainer.global_step`` from now on (done by
        ``log_graph`` at the start of ``fit``/``validate``/``test``, and by ``HeadwayCallback``
        for a ``Trainer(enable_autolog_hparams=False)``)."""
        self._trainer = weakref.ref(trainer)

    def log_graph(self, model: torch.nn.Module, input_array: torch.Tensor | None = None) -> None:
        """Lightning calls this with the module when a run starts: the logger learns its
        ``Trainer`` (loggers are not told otherwise). Stores no graph."""
        trainer = getattr(model, "_trainer", None)
        if isinstance(trainer, pl.Trainer):
            self.attach(trainer)

    def _steps_completed(self, step: int | None) -> int:
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is not None:
            return int(trainer.global_step)
        if not self._warned_no_trainer:
            self._warned_no_trainer = True
            logger.warning(
                "HeadwayLogger does not know its Trainer (enable_autolog_hparams=False and no "
                "HeadwayCallback): metrics are reported at Lightning's logging step, which is "
                "one less than the batches completed for step-level metrics"
            )
        return int(step) if step is not None else self._last_step

    @rank_zero_only
    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        """Record ``params`` (a dict or ``Namespace``; nested dicts flattened with ``/``) for
        the metadata of the checkpoints registered from now on."""
        flat = _sanitize_params(_flatten_dict(_convert_params(params)))
        self._hparams.update(flat)
        logger.info("Lightning hparams: %s", self._hparams)

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        """Report ``metrics`` at ``steps_completed=step`` (the last step when None), split into
        Headway groups by name.

        Raises:
            TypeError: naming a metric whose value is not a number (the Core API's check).
            headway.client.APIError: the registry rejected an earlier batch.
        """
        self._last_step = self._steps_completed(step)
        values = dict(metrics)
        epoch = values.pop("epoch", None)
        groups: dict[str, dict[str, float]] = {}
        for name, value in values.items():
            groups.setdefault(metric_group(name), {})[name] = value
        train = self._context().train
        epoch_value = float(epoch) if epoch is not None else None
        for group, batch in groups.items():
            if group == "training":
                train.report_training_metrics(self._last_step, batch, epoch=epoch_value)
            elif group == "validation":
                train.report_validation_metrics(self._last_step, batch, epoch=epoch_value)
            else:
                train.report_metrics(group, self._last_step, batch, epoch=epoch_value)

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Register the files ``checkpoint_callback`` saved since the last call (top-k, best and
        last), each as one Headway checkpoint, when ``log_model`` is True."""
        if not self._log_model:
            return
        # Set by ModelCheckpoint just before it calls us: the global step of this save.
        step = getattr(checkpoint_callback, "_last_global_step_saved", None)
        steps_completed = int(step) if isinstance(step, int) else self._steps_completed(None)
        scores = {
            os.path.abspath(path): _float_or_none(score)
            for path, score in checkpoint_callback.best_k_models.items()
        }
        paths = [
            checkpoint_callback.best_model_path,
            checkpoint_callback.last_model_path,
            *checkpoint_callback.best_k_models,
        ]
        for path in dict.fromkeys(os.path.abspath(p) for p in paths if p):
            try:
                key = (path, os.stat(path).st_mtime_ns)
            except FileNotFoundError:
                continue  # deleted by top-k before we saw it
            if key in self._registered:
                continue
            info: dict[str, Any] = {
                "monitor": checkpoint_callback.monitor,
                "score": scores.get(path, _float_or_none(checkpoint_callback.current_score)),
                "mode": checkpoint_callback.mode,
            }
            if self._hparams:
                info["hparams"] = dict(self._hparams)
            self._registered[key] = store_file(self._context(), path, steps_completed, info)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """End the run the logger started itself (none when given a context): deliver its
        metrics and end it COMPLETED, or ERROR when ``status`` is ``"failed"``."""
        if not self._owns_run or self._core is None:
            return
        context, self._core = self._core, None
        context._failed = context._failed or status == "failed"
        context.close()


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class DetLogger(HeadwayLogger):
    """``HeadwayLogger`` bound to an existing Core API context, named and built as
    Determined's framework integrations are (``DetCallback(core_context, ...)``): the context
    is the first, required argument.

    .. code::

        with core_v2.init_context(config=core_v2.Config(name="run")) as core_context:
            trainer = L.Trainer(logger=DetLogger(core_context))

    Everything else is ``HeadwayLogger``'s (metric names and groups, steps, hparams,
    checkpoints, rank zero only); the logger never starts or ends a run: the context's owner
    closes it.

    Arguments:
        core_context (headway.core.Context): a managed trial's ``core.init()``, or
            ``core_v2.init_context()`` / the context of ``core_v2.init()``.
        log_model (bool): register ``ModelCheckpoint`` files as Headway checkpoints (default
            True).

    Raises:
        TypeError: when ``core_context`` is not a ``headway.core.Context`` (None included).
    """

    def __init__(self, core_context: Context, *, log_model: bool = True) -> None:
        if not isinstance(core_context, Context):
            raise TypeError(
                "DetLogger(core_context): expected a headway.core.Context (core.init(), "
                f"core_v2.init_context()), got {type(core_context).__name__}; "
                "HeadwayLogger() starts a run of its own"
            )
        super().__init__(core_context, log_model=log_model)
