"""Finding the pool types: every subpackage ``registry/pools/<type>/`` with a ``provider``
module is one (a folder without it, such as a design not wired in yet, is skipped).

A type's folder holds ``provider.py`` exporting ``PROVIDER`` (a ``PoolProvider`` whose ``type``
is the folder's name) and, when it has tables, ``models.py`` (imported by ``registry.models``
through ``import_pool_models``). General code asks here by type name and never imports a
type's folder (an import contract in pyproject.toml). The provider modules import no model, so
the pools file can be checked, and the beat schedule built, before Django loads its apps.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from pathlib import Path

from registry.pools.provider import HostOrigin, PoolProvider

# The type of a pool that does not say one, and of the embedded ``default`` pool.
DEFAULT_TYPE = "agent"
_HERE = [str(Path(__file__).parent)]


def _type_names() -> list[str]:
    # A folder without a provider module (a design not wired in yet) is no pool type.
    names = sorted(info.name for info in pkgutil.iter_modules(_HERE) if info.ispkg)
    return [
        name
        for name in names
        if not name.startswith("_")
        and importlib.util.find_spec(f"{__package__}.{name}.provider") is not None
    ]


@functools.cache
def pool_providers() -> dict[str, PoolProvider]:
    """Every pool type's provider by type name: ``agent`` first, the others by name.

    Raises:
        ImportError: a type's folder has no ``provider`` module.
        TypeError: its ``PROVIDER`` names another type than its folder.
    """
    found: dict[str, PoolProvider] = {}
    names = _type_names()
    for name in sorted(names, key=lambda n: (n != DEFAULT_TYPE, n)):
        provider = importlib.import_module(f"{__package__}.{name}.provider").PROVIDER
        if provider.type != name:
            raise TypeError(
                f"registry/pools/{name}/provider.py's PROVIDER is of type {provider.type!r}"
            )
        found[name] = provider
    return found


def pool_provider(type_name: str) -> PoolProvider:
    """The provider of pool type ``type_name``.

    Raises:
        KeyError: no such type (the pools file's parser refuses it before).
    """
    return pool_providers()[type_name]


def per_run_providers() -> list[PoolProvider]:
    """The providers whose pools make their hosts per run (``HostOrigin.PER_RUN``)."""
    return [p for p in pool_providers().values() if p.host_origin is HostOrigin.PER_RUN]


def poll_schedule() -> dict[str, float]:
    """Seconds between polls, by type, of the types that poll (``PoolProvider.poll_seconds``).

    Raises:
        ImproperlyConfigured: a type's interval setting is not a positive number.
    """
    out: dict[str, float] = {}
    for name, provider in pool_providers().items():
        seconds = provider.poll_seconds()
        if seconds is not None:
            out[name] = seconds
    return out


def import_pool_models() -> None:
    """Import every type's ``models`` module (called once by ``registry.models``)."""
    for name in _type_names():
        module = f"{__package__}.{name}.models"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
