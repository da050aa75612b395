"""``TrainingOperator.from_creators``: RaySGD's creator functions turned into an operator class.

``from_creators(model_creator, optimizer_creator, data_creator=None, loss_creator=None,
scheduler_creator=None, serialize_data_creation=True)`` returns a ``TrainingOperator`` subclass
whose ``setup(config)`` calls the creators and registers what they return, as RaySGD's did.

The class is made at run time, and workers receive their operator class by pickle, which would
look for it by name. Its metaclass is registered with ``copyreg``, so the class pickles as "the
class ``from_creators`` makes from these functions": the creators themselves must be picklable
(module-level functions).
"""

from __future__ import annotations

import contextlib
import copyreg
import fcntl
import inspect
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import torch

_LOCK_FILE = os.path.join(tempfile.gettempdir(), "headway-torch-trainer-data.lock")


class _CreatorMeta(type):
    """Metaclass of ``from_creators`` classes (their pickling is registered below)."""


def _reduce(cls: _CreatorMeta) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return make_creator_operator, (cls.__bases__[0], *cls._creators)  # type: ignore[attr-defined]


copyreg.pickle(_CreatorMeta, _reduce)


@contextlib.contextmanager
def _data_lock(serialize: bool) -> Iterator[None]:
    # RaySGD's serialize_data_creation: one worker per host at a time runs data_creator
    # (e.g. so that only one downloads a dataset).
    if not serialize:
        yield
        return
    with open(_LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _creator_setup(self: Any, config: dict[str, Any]) -> None:
    model_creator, optimizer_creator, data_creator, loss_creator, scheduler_creator, serialize = (
        type(self)._creators
    )
    train_loader = validation_loader = None
    if data_creator is not None:
        with _data_lock(serialize):
            loaders = data_creator(config)
        if isinstance(loaders, tuple | list):
            train_loader, validation_loader = loaders
        else:
            train_loader = loaders
    models = model_creator(config)
    optimizers = optimizer_creator(models, config)
    schedulers = scheduler_creator(optimizers, config) if scheduler_creator is not None else None
    criterion = None
    if loss_creator is not None:
        is_loss_class = inspect.isclass(loss_creator) and issubclass(
            loss_creator, torch.nn.modules.loss._Loss
        )
        criterion = loss_creator() if is_loss_class else loss_creator(config)
    # The operator's model / optimizer / criterion / scheduler properties fall back to what
    # is registered (the first of several).
    self.register(models=models, optimizers=optimizers, criterion=criterion, schedulers=schedulers)
    self.register_data(train_loader=train_loader, validation_loader=validation_loader)


def make_creator_operator(
    base: type,
    model_creator: Callable[[dict[str, Any]], Any],
    optimizer_creator: Callable[[Any, dict[str, Any]], Any],
    data_creator: Callable[[dict[str, Any]], Any] | None = None,
    loss_creator: Any = None,
    scheduler_creator: Callable[[Any, dict[str, Any]], Any] | None = None,
    serialize_data_creation: bool = True,
) -> Any:
    """A subclass of ``base`` (``TrainingOperator.from_creators``'s class) whose
    ``setup(config)`` calls RaySGD's creator functions and registers what they return:
    ``model_creator(config)`` (a model or several), ``optimizer_creator(models, config)``,
    ``data_creator(config)`` (a train loader, or ``(train, validation)``), ``loss_creator``
    (a ``torch.nn`` loss class, or ``fn(config)``), ``scheduler_creator(optimizers, config)``.
    ``serialize_data_creation``: one worker per host runs ``data_creator`` at a time.

    Raises:
        TypeError: ``model_creator`` or ``optimizer_creator`` missing, or a creator not callable.
    """
    creators = {
        "model_creator": model_creator,
        "optimizer_creator": optimizer_creator,
        "data_creator": data_creator,
        "loss_creator": loss_creator,
        "scheduler_creator": scheduler_creator,
    }
    for name, fn in creators.items():
        if fn is not None and not callable(fn):
            raise TypeError(f"from_creators({name}=...) must be callable, not {fn!r}")
    if model_creator is None or optimizer_creator is None:
        raise TypeError("from_creators needs model_creator and optimizer_creator")
    return _CreatorMeta(
        "CreatorOperator",
        (base,),
        {
            "_creators": (*creators.values(), bool(serialize_data_creation)),
            "setup": _creator_setup,
            "__module__": __name__,
        },
    )
