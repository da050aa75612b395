"""``TorchTrainer.as_trainable()``: a Ray Tune class trainable around a ``TorchTrainer``.

Ray Tune (Ray 2.x) runs ``tune.Trainable`` subclasses: ``setup(config)`` once per trial,
``step()`` per iteration (its dict is the iteration's result), ``save_checkpoint(dir)`` /
``load_checkpoint(dir)`` for Tune's checkpoints and ``cleanup()`` at the end. The trial's
resources come from ``default_resource_request``: one CPU for the trainable's own actor and one
bundle per worker, which the trainer's actors then use (``_ray_group.RayLauncher``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ray import tune

_CHECKPOINT_FILE = "trainer.pt"


class TorchTrainable(tune.Trainable):
    """A trial: a ``TorchTrainer`` built from the class attributes and the trial's config.

    Class attributes (set by ``make_trainable``): ``_trainer_cls``, ``_trainer_args``,
    ``_trainer_kwargs`` and ``_override_tune_step``.
    """

    _trainer_cls: Any = None
    _trainer_args: tuple[Any, ...] = ()
    _trainer_kwargs: dict[str, Any] = {}  # noqa: RUF012 - replaced per subclass, never mutated
    _override_tune_step: Callable[[Any, int], dict[str, Any]] | None = None

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> tune.PlacementGroupFactory:
        """One CPU for the trainable, then one bundle per worker (as RaySGD's trainable)."""
        kwargs = cls._trainer_kwargs
        worker: dict[str, float] = {"CPU": float(kwargs.get("num_cpus_per_worker") or 1)}
        if kwargs.get("use_gpu") is True:
            worker["GPU"] = 1.0
        worker.update(kwargs.get("resources_per_worker") or {})
        return tune.PlacementGroupFactory(
            [{"CPU": 1.0}] + [dict(worker) for _ in range(kwargs.get("num_workers", 1))]
        )

    def setup(self, config: dict[str, Any]) -> None:
        kwargs = dict(self._trainer_kwargs)
        kwargs["config"] = {**(kwargs.get("config") or {}), **config}
        self.trainer = self._trainer_cls(*self._trainer_args, **kwargs)

    def step(self) -> dict[str, Any]:
        if self._override_tune_step is not None:
            return dict(self._override_tune_step(self.trainer, self.iteration))
        train_stats = self.trainer.train()
        validation_stats = self.trainer.validate()
        return {**train_stats, **validation_stats}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        self.trainer.save(os.path.join(checkpoint_dir, _CHECKPOINT_FILE))

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.trainer.load(os.path.join(str(checkpoint), _CHECKPOINT_FILE))

    def cleanup(self) -> None:
        self.trainer.shutdown()


def make_trainable(
    trainer_cls: type,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    override_tune_step: Callable[[Any, int], dict[str, Any]] | None,
) -> type[TorchTrainable]:
    """A ``TorchTrainable`` subclass bound to these ``TorchTrainer`` arguments (Tune pickles
    it with cloudpickle, so it needs no module-level name).

    Raises:
        ValueError: ``kwargs`` sets ``use_gpu="auto"`` (a trial's resources are reserved before
            the trainer exists: say True or False).
    """
    if kwargs.get("use_gpu", False) == "auto":
        raise ValueError(
            "as_trainable(use_gpu='auto'): Tune reserves GPUs up front; pass True/False"
        )
    kwargs = {"use_gpu": False, **kwargs}
    return type(
        "TorchTrainable",
        (TorchTrainable,),
        {
            "_trainer_cls": trainer_cls,
            "_trainer_args": tuple(args),
            "_trainer_kwargs": dict(kwargs),
            "_override_tune_step": staticmethod(override_tune_step) if override_tune_step else None,
        },
    )
