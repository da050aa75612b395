"""The ``headway`` command line: log in, create and follow experiments, read trials, logs and
checkpoints over the registry's REST API. Entry point: ``headway.cli.main:main``."""

from headway.cli._model_def import MAX_MODEL_DEF_BYTES, ModelDefinitionError, pack_model_definition

__all__ = ["MAX_MODEL_DEF_BYTES", "ModelDefinitionError", "pack_model_definition"]
