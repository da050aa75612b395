"""``wire``: the wire models (``headway.client._wire``), imported at their first attribute access.

They are pydantic classes whose construction is most of ``headway.client``'s import time; a
command that never reads one (``headway --help``, ``headway checkpoint download --format``) should
not pay it. The client's modules import ``wire`` from here; ``from headway.client import _wire`` imports
the module itself (at once), and both give the same classes.
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["WIRE_MODULE", "LazyModule", "wire"]

WIRE_MODULE = "headway.client._wire"


class LazyModule(ModuleType):
    """A stand-in for module ``name`` that imports it at the first attribute read.

    The import goes through ``importlib.import_module``, whose per-module import lock makes two
    threads' first reads wait for one import (``importlib.util.LazyLoader`` runs the module's
    code in whichever thread reads first and, before Python 3.12, lets a second thread see it
    half-run). After the first read the module's names are copied here, so later reads cost a
    plain attribute lookup.

    Raises:
        ModuleNotFoundError: at the first read, when there is no module ``name``.
        AttributeError: for a name the module does not define.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name, f"{name}, imported at its first attribute read")
        self._target = name

    def __getattr__(self, attr: str) -> Any:  # only for names not copied yet
        if attr.startswith("__"):
            raise AttributeError(attr)
        module = importlib.import_module(self._target)
        self.__dict__.update(
            (key, value) for key, value in vars(module).items() if not key.startswith("__")
        )
        return getattr(module, attr)


if TYPE_CHECKING:  # type checkers see the module itself
    from headway.client import _wire as wire
else:
    wire = LazyModule(WIRE_MODULE)
