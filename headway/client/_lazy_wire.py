"""``wire``: the wire models (``headway.client._wire``), executed at their first attribute access.

They are pydantic classes whose construction is most of ``headway.client``'s import time; a
command that never reads one (``headway checkpoint download``, ``headway --help``) should not pay
it. The client's modules import ``wire`` from here; ``from headway.client import _wire`` still
works (and loads them at once).
"""

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING

__all__ = ["WIRE_MODULE", "import_lazily", "wire"]

WIRE_MODULE = "headway.client._wire"


def import_lazily(name: str) -> ModuleType:
    """Module ``name``, executed at its first attribute access (``importlib.util.LazyLoader``,
    the standard library's recipe); the module it returns is the one in ``sys.modules``.

    Raises:
        ModuleNotFoundError: when there is no module ``name``.
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:  # type checkers see the module itself
    from headway.client import _wire as wire
else:
    wire = import_lazily(WIRE_MODULE)
