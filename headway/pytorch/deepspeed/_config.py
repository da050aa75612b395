"""``overwrite_deepspeed_config``: merge values (from hparams) into a DeepSpeed config."""

from __future__ import annotations

import copy
import json
import os
from typing import Any


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in the DeepSpeed config")
        out[key] = value
    return out


def _merge(base: dict[str, Any], source: dict[str, Any], where: str) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in source.items():
        if not isinstance(key, str):
            raise TypeError(f"source_ds_dict{where}: keys must be strings, got {key!r}")
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def overwrite_deepspeed_config(
    base_ds_config: str | os.PathLike[str] | dict[str, Any], source_ds_dict: dict[str, Any]
) -> dict[str, Any]:
    """Return ``base_ds_config`` with the values of ``source_ds_dict`` written over it.

    The merge goes depth first: where both sides hold a dict under a key, their keys are
    merged; anything else in ``source_ds_dict`` (a leaf, or a key the base lacks) replaces or
    adds the base's value. Neither argument is modified. Same semantics as Determined's
    ``overwrite_deepspeed_config`` (``util.merge_dicts``).

    .. code::

        ds_config = overwrite_deepspeed_config(
            "ds_config.json", context.get_hparams().get("overwrite_deepspeed_args", {})
        )

    Arguments:
        base_ds_config (str | PathLike | dict): a DeepSpeed JSON config file, or its dict.
        source_ds_dict (dict): the values to write over it (nested dicts for nested fields).

    Raises:
        TypeError: an argument of another type (naming it), or a non-string key.
        FileNotFoundError: the config file does not exist.
        ValueError: the file is not valid JSON, holds a duplicate key, or is not an object.
    """
    if isinstance(base_ds_config, str | os.PathLike):
        path = os.fspath(base_ds_config)
        try:
            with open(path, encoding="utf-8") as fh:
                base = json.load(fh, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as exc:
            raise ValueError(f"DeepSpeed config {path}: invalid JSON ({exc})") from None
        except ValueError as exc:
            raise ValueError(f"DeepSpeed config {path}: {exc}") from None
        if not isinstance(base, dict):
            raise ValueError(f"DeepSpeed config {path}: expected a JSON object at the top")
    elif isinstance(base_ds_config, dict):
        base = base_ds_config
    else:
        raise TypeError(
            "overwrite_deepspeed_config(): base_ds_config must be a path or a dict, got "
            f"{type(base_ds_config).__name__}"
        )
    if not isinstance(source_ds_dict, dict):
        raise TypeError(
            "overwrite_deepspeed_config(): source_ds_dict must be a dict, got "
            f"{type(source_ds_dict).__name__}"
        )
    return _merge(base, source_ds_dict, "")
