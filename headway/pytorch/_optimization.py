"""Optimizer and gradient-aggregation methods of ``PyTorchTrialContext`` (Determined's names).

Kept apart from ``_context.py`` so the config and wrapping code stays short; the context class
inherits ``ContextOptimization``, which holds ``wrap_optimizer``, ``backward`` and
``step_optimizer`` and the ``optimizations.aggregation_frequency`` state they share. Source:
Determined 0.38.1 ``pytorch/_pytorch_context.py`` (``wrap_optimizer``, ``backward``,
``step_optimizer``, ``_should_communicate_and_update``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch


class _TrainPosition(Protocol):
    """The part of the context's ``_Position`` this mixin reads."""

    batches_trained: int


class ContextOptimization:
    """Mixin of ``PyTorchTrialContext``: optimizers, ``backward``, gradient aggregation."""

    # Set by PyTorchTrialContext.__init__; declared here for the type checker.
    models: list[torch.nn.Module]
    optimizers: list[torch.optim.Optimizer]
    _position: _TrainPosition

    if TYPE_CHECKING:
        # Defined by ContextExtras, the context's other mixin.
        def _amp_scale_loss(self, loss: torch.Tensor) -> torch.Tensor: ...
        def _amp_scaler(self, scaler: Any) -> Any: ...

    def _init_optimization(
        self, aggregation_frequency: int, average_aggregated_gradients: bool
    ) -> None:
        """Check and store the ``optimizations`` settings; called first by the context."""
        if (
            isinstance(aggregation_frequency, bool)
            or not isinstance(aggregation_frequency, int)
            or aggregation_frequency < 1
        ):
            raise ValueError(
                f"aggregation_frequency must be a positive int, got {aggregation_frequency!r}"
            )
        # Gradients are accumulated over this many batches before the optimizers step
        # (Determined's ``optimizations.aggregation_frequency``).
        self._aggregation_frequency = aggregation_frequency
        self._average_aggregated_gradients_default = bool(average_aggregated_gradients)
        self._optimizer_configs: dict[int, dict[str, Any]] = {}

    # -- wrapping ------------------------------------------------------------------------------

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool | None = None,
        average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """Register ``optimizer`` for checkpointing and ``step_optimizer``; return it.

        Arguments:
            optimizer (torch.optim.Optimizer): built over wrapped models' parameters.
            backward_passes_per_step (int): how many ``context.backward()`` calls one
                ``train_batch`` makes before ``step_optimizer`` (e.g. two losses). As in
                Determined with its torch DDP backend it does not change when the optimizer
                steps: gradients of several backward passes in one batch simply add up.
                Accumulating across batches is ``optimizations.aggregation_frequency``.
            fp16_compression (bool | None): Determined's Horovod-only fp16 gradient
                compression; only None/False is supported.
            average_aggregated_gradients (bool | None): with ``aggregation_frequency`` n > 1,
                divide the gradients accumulated over n batches by n before stepping (True), or
                step on their sum (False). None: ``optimizations.average_aggregated_gradients``
                (default True).

        Raises:
            ValueError: naming the argument: ``backward_passes_per_step`` below 1, or
                ``fp16_compression=True``.

        Source: Determined ``PyTorchTrialContext.wrap_optimizer`` (harness/determined/pytorch/
        _pytorch_context.py, 0.38.1).
        """
        if (
            isinstance(backward_passes_per_step, bool)
            or not isinstance(backward_passes_per_step, int)
            or backward_passes_per_step < 1
        ):
            raise ValueError(
                "backward_passes_per_step for local gradient aggregation must be an int >= 1, "
                f"got {backward_passes_per_step!r}"
            )
        if fp16_compression:
            raise ValueError(
                "wrap_optimizer(fp16_compression=True) is not supported: it compresses gradients "
                "for Horovod's all-reduce, and Headway uses torch DDP"
            )
        if average_aggregated_gradients is None:
            average_aggregated_gradients = self._average_aggregated_gradients_default
        self._optimizer_configs[id(optimizer)] = {
            "average_aggregated_gradients": bool(average_aggregated_gradients),
            "backward_passes_per_step": backward_passes_per_step,
        }
        self.optimizers.append(optimizer)
        return optimizer

    # -- training step -------------------------------------------------------------------------

    def _should_communicate_and_update(self) -> bool:
        """Whether the batch being trained ends an ``aggregation_frequency`` window."""
        return (self._position.batches_trained + 1) % self._aggregation_frequency == 0

    @contextlib.contextmanager
    def _no_sync(self) -> Iterator[None]:
        """Skip DDP's gradient all-reduce for forward/backward passes run inside."""
        with contextlib.ExitStack() as stack:
            for model in self.models:
                if isinstance(model, torch.nn.parallel.DistributedDataParallel):
                    stack.enter_context(model.no_sync())
            yield

    def backward(
        self,
        loss: torch.Tensor,
        gradient: torch.Tensor | None = None,
        retain_graph: bool = False,
        create_graph: bool = False,
    ) -> None:
        """Compute gradients of ``loss`` (same arguments as ``torch.Tensor.backward``).

        Gradients of several calls add up until ``step_optimizer`` zeroes them. With several
        slots and ``aggregation_frequency`` n > 1 the harness runs the first n - 1 batches of
        each window under DDP's ``no_sync()``, so ranks exchange gradients once per window.
        With ``experimental.use_amp()`` the loss is scaled by its ``GradScaler`` first.
        """
        loss = self._amp_scale_loss(loss)
        loss.backward(gradient=gradient, retain_graph=retain_graph, create_graph=create_graph)

    def step_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        clip_grads: Callable[[list[torch.nn.Parameter]], Any] | None = None,
        auto_zero_grads: bool = True,
        scaler: Any = None,
    ) -> None:
        """Step ``optimizer``, then zero its gradients (Determined's semantics).

        Arguments:
            optimizer: one returned by ``wrap_optimizer``.
            clip_grads: called with the list of the optimizer's parameters before the step,
                e.g. ``lambda params: torch.nn.utils.clip_grad_norm_(params, 1.0)``.
            auto_zero_grads (bool): zero gradients after stepping; must be True when
                ``aggregation_frequency`` > 1.
            scaler: a ``GradScaler`` to step through (AMP); it unscales before ``clip_grads``
                unless you already called ``scaler.unscale_(optimizer)`` this step.

        With ``optimizations.aggregation_frequency`` n > 1 only the call in the last batch of
        each window of n batches steps (batch ``i`` with ``(i + 1) % n == 0``), on the gradients
        of those n batches divided by n (``average_aggregated_gradients``, default True) or on
        their sum.

        Raises:
            ValueError: ``optimizer`` was not wrapped, or ``auto_zero_grads=False`` with
                ``aggregation_frequency`` > 1.
        """
        scaler = self._amp_scaler(scaler)  # experimental.use_amp(): its scaler by default
        config = self._optimizer_configs.get(id(optimizer))
        if config is None:
            raise ValueError("step_optimizer(): wrap the optimizer with wrap_optimizer() first")
        agg = self._aggregation_frequency
        if agg > 1 and not auto_zero_grads:
            raise ValueError(
                f"step_optimizer(auto_zero_grads=False) is not allowed with "
                f"optimizations.aggregation_frequency = {agg} (> 1)"
            )
        if agg > 1 and not self._should_communicate_and_update():
            return
        if agg > 1 and config["average_aggregated_gradients"]:
            _scale_gradients(_params(optimizer), 1.0 / agg)
        if clip_grads is not None:
            if scaler is not None and not _already_unscaled(scaler, optimizer):
                scaler.unscale_(optimizer)
            clip_grads(_params(optimizer))
        if scaler is not None:
            scaler.step(optimizer)
        else:
            optimizer.step()
        if auto_zero_grads:
            optimizer.zero_grad(set_to_none=True)


def _params(optimizer: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    # Listed only when needed: step_optimizer runs every batch, most often with neither.
    return [p for group in optimizer.param_groups for p in group["params"]]


@torch.no_grad()
def _scale_gradients(params: list[torch.nn.Parameter], factor: float) -> None:
    for param in params:
        if param.grad is not None:
            param.grad.mul_(factor)


def _already_unscaled(scaler: Any, optimizer: torch.optim.Optimizer) -> bool:
    # A trial written for Determined may call scaler.unscale_(opt) itself before
    # step_optimizer; a second unscale_ would raise, so look at GradScaler's per-optimizer stage.
    states = getattr(scaler, "_per_optimizer_states", None)
    if not isinstance(states, dict) or id(optimizer) not in states:
        return False
    stage = states[id(optimizer)].get("stage")
    return getattr(stage, "name", None) == "UNSCALED"
