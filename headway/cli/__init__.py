"""The ``headway`` command line: log in, create, follow and control experiments and trials,
read logs and checkpoints over the registry's REST API. Entry point: ``headway.cli.main:main``."""

import importlib
from typing import Any

# Re-exported (the CLI's public names before they moved), loaded on first use: every command imports
# this package, and the config models would add ~0.2 s to commands that never read a config.
_REEXPORTS = {
    "MAX_MODEL_DEF_BYTES": "headway.archive",
    "ModelDefinitionError": "headway.archive",
    "pack_model_definition": "headway.archive",
    "OverrideError": "headway.expconf",
    "merge_hparam_overrides": "headway.expconf",
    "parse_hparam_overrides": "headway.expconf",
    "parse_max_length": "headway.expconf",
}

__all__ = [
    "MAX_MODEL_DEF_BYTES",
    "ModelDefinitionError",
    "OverrideError",
    "merge_hparam_overrides",
    "pack_model_definition",
    "parse_hparam_overrides",
    "parse_max_length",
]


def __getattr__(name: str) -> Any:
    if name in _REEXPORTS:
        return getattr(importlib.import_module(_REEXPORTS[name]), name)
    raise AttributeError(f"module 'headway.cli' has no attribute {name!r}")
