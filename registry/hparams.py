"""Hyperparameters as flat ``name -> value`` pairs, shared by the dashboard and the registry."""

from __future__ import annotations

from typing import Any


def flatten_hparams(hparams: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested hyperparameters as sorted ``("optimizer.lr", 0.1)`` pairs (dotted names)."""
    if not isinstance(hparams, dict):
        return [(prefix, hparams)] if prefix else []
    out: list[tuple[str, Any]] = []
    for key in sorted(hparams):
        path = f"{prefix}.{key}" if prefix else str(key)
        value = hparams[key]
        if isinstance(value, dict) and value:
            out.extend(flatten_hparams(value, path))
        else:
            out.append((path, value))
    return out
