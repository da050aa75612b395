"""``headway.import_from_path``: import modules from a folder (e.g. a checkpoint's ``code/``).

Same contract as Determined's ``det.import_from_path`` (``harness/determined/_import.py``): a
context manager that puts the folder first on ``sys.path``, hides modules already imported from
the current directory that a module in the folder would shadow (so an older ``model_def`` can be
imported next to the current one), and
afterwards forgets every module it imported from the folder and restores what it hid.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType

_active = threading.Lock()


def _module_dir(module: ModuleType) -> str | None:
    """The folder a module (or package) was imported from, None for built-ins."""
    file: str | None = getattr(module, "__file__", None)
    if not file:
        return None
    folder, name = os.path.split(os.path.abspath(file))
    if name == "__init__.py":
        folder = os.path.dirname(folder)
    return folder


def _modules_from(folder: str) -> list[str]:
    """Names in ``sys.modules`` imported from ``folder`` (packages and their submodules)."""
    folder = os.path.abspath(folder)
    found: list[str] = []
    # Sorted, so a package comes before its submodules and they can be matched by prefix.
    for name, module in sorted(sys.modules.items()):
        if module is None:
            continue
        if _module_dir(module) == folder or any(name.startswith(f"{p}.") for p in found):
            found.append(name)
    return found


@contextlib.contextmanager
def import_from_path(path: str | os.PathLike[str]) -> Iterator[None]:
    """Import from ``path`` inside the block; clean ``sys.path`` and ``sys.modules`` afterwards.

    Example (load the model code saved in a checkpoint next to the current one)::

        import model_def as new_model_def

        with headway.import_from_path(checkpoint_dir / "code"):
            import model_def as old_model_def

    No ``__pycache__`` is written into ``path`` (it may be a checkpoint). Not reentrant.

    Arguments:
        path (str | os.PathLike): a folder holding modules or packages.

    Raises:
        RuntimeError: when called while another ``import_from_path`` block is open (nesting or
            another thread), as Determined.
    """
    if not _active.acquire(blocking=False):
        raise RuntimeError("headway.import_from_path does not support nesting or several threads")
    folder = os.path.abspath(os.fspath(path))
    old_path = sys.path
    old_bytecode = sys.dont_write_bytecode
    hidden: dict[str, ModuleType] = {}
    try:
        # Modules of the working directory would shadow same-named ones in ``folder``. Only
        # those are hidden (Determined hides every module of the working directory, which would
        # also hide ``headway`` itself when running from a source checkout).
        names = os.listdir(folder) if os.path.isdir(folder) else []
        shadowed = {os.path.splitext(n)[0] for n in names}
        for name in _modules_from(os.getcwd()):
            if name.split(".")[0] in shadowed:
                hidden[name] = sys.modules.pop(name)
        sys.path = [folder] + [p for p in old_path if p not in ("", os.getcwd())]
        sys.dont_write_bytecode = True
        yield
    finally:
        sys.dont_write_bytecode = old_bytecode
        for name in _modules_from(folder):
            sys.modules.pop(name, None)
        sys.path = old_path
        sys.modules.update(hidden)
        _active.release()
