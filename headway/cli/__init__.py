"""The ``headway`` command line: log in, create, follow and control experiments and trials,
read logs and checkpoints over the registry's REST API. Entry point: ``headway.cli.main:main``."""

from headway.archive import MAX_MODEL_DEF_BYTES, ModelDefinitionError, pack_model_definition
from headway.expconf import (  # re-exported: the CLI's public names before #26
    OverrideError,
    merge_hparam_overrides,
    parse_hparam_overrides,
    parse_max_length,
)

__all__ = [
    "MAX_MODEL_DEF_BYTES",
    "ModelDefinitionError",
    "OverrideError",
    "merge_hparam_overrides",
    "pack_model_definition",
    "parse_hparam_overrides",
    "parse_max_length",
]
