"""A checkpoint's metadata: validation, the merge of every rank's metadata, ``metadata.json``.

A sharded checkpoint (``store_path(..., shard=True)``) is written by every rank, and each rank
may pass metadata of its own; the checkpoint's metadata is all of them merged, as in
Determined's Core API: dicts under the same key merge key by key, and a key that ranks give
different values is an error naming it and the ranks that gave it.
"""

from __future__ import annotations

import json
import pathlib
import uuid
from typing import TYPE_CHECKING, Any

from headway.core._metrics import json_safe_metrics
from headway.core._train import check_steps_completed

if TYPE_CHECKING:
    from headway.core._distributed import DistributedContext

METADATA_FILE = "metadata.json"


def check_metadata(metadata: Any, *, require_steps: bool = True) -> dict[str, Any]:
    """Return a JSON-safe copy of one rank's checkpoint ``metadata`` with ``steps_completed``
    (when present) as an int.

    Arguments:
        require_steps (bool): whether ``steps_completed`` must be in it (False for one rank's
            part of a sharded checkpoint: the merged metadata must have it).

    Raises:
        ValueError: ``metadata`` is not a dict, or ``steps_completed`` is missing (when
            required) or is not an int >= 0.
        TypeError: naming a key whose value is not JSON-serializable.
    """
    if not isinstance(metadata, dict):
        raise ValueError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
    if require_steps and "steps_completed" not in metadata:
        raise ValueError("checkpoint metadata must contain 'steps_completed' (an int >= 0)")
    steps = None
    if "steps_completed" in metadata:
        steps = check_steps_completed(metadata["steps_completed"])
    safe = json_safe_metrics(metadata, what="checkpoint metadata", metric_limits=False)
    if steps is not None:
        safe["steps_completed"] = steps
    return safe


def merge_metadata(per_rank: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Merge the metadata of every rank (in rank order) into one dict.

    Dicts under the same key merge recursively; a key present on several ranks with equal
    values is kept once; any other repeated key (different values, or a dict on one rank and
    not on another) is a conflict.

    Returns:
        ``(merged, conflicts)``: ``conflicts`` maps each conflicting key's path from the root
        (``"/a/b"``) to the ranks that gave a value there; the merged value of such a key is
        the lowest rank's.
    """
    merged: dict[str, Any] = {}
    givers: dict[str, list[int]] = {}
    conflicts: dict[str, list[int]] = {}
    for rank, metadata in enumerate(per_rank):
        _merge_into(merged, metadata, rank, "", givers, conflicts)
    return merged, conflicts


def _merge_into(
    target: dict[str, Any],
    source: dict[str, Any],
    rank: int,
    prefix: str,
    givers: dict[str, list[int]],
    conflicts: dict[str, list[int]],
) -> None:
    for key, value in source.items():
        path = f"{prefix}/{key}"
        givers.setdefault(path, []).append(rank)
        if isinstance(value, dict) and isinstance(target.get(key, {}), dict):
            _merge_into(target.setdefault(key, {}), value, rank, path, givers, conflicts)
        elif key not in target:
            target[key] = value
        elif target[key] != value:
            conflicts[path] = list(givers[path])


def agree_on_shard(dist: DistributedContext, metadata: Any) -> tuple[str, dict[str, Any]]:
    """A sharded checkpoint's ``storage_id`` (a uuid4 the chief chose) and every rank's
    ``metadata`` merged (``merge_metadata``), from one allgather: a collective every rank calls.

    Every rank gets the same answer, or raises the same error, before anything is stored, so
    no rank is left waiting in a later collective of the checkpoint.

    Raises:
        ValueError / TypeError: this rank's ``metadata`` is invalid (``check_metadata``).
        ValueError: another rank's metadata is invalid (naming the rank and its error); ranks
            gave different values for one key (naming the key's path and the ranks); no rank
            gave ``steps_completed``.
    """
    problem: ValueError | TypeError | None = None
    mine: dict[str, Any] = {}
    try:
        mine = check_metadata(metadata, require_steps=False)
    except (ValueError, TypeError) as exc:
        problem = exc
    gathered = dist.allgather((str(uuid.uuid4()), mine, None if problem is None else str(problem)))
    if problem is not None:
        raise problem
    invalid = [f"rank {rank}: {msg}" for rank, (_, _, msg) in enumerate(gathered) if msg]
    if invalid:
        raise ValueError(f"sharded checkpoint: invalid metadata on {'; '.join(invalid)}")
    merged, conflicts = merge_metadata([part for _, part, _ in gathered])
    if conflicts:
        raise ValueError(_conflict_message(conflicts))
    if "steps_completed" not in merged:
        raise ValueError(
            "sharded checkpoint metadata must contain 'steps_completed' (an int >= 0) on at "
            "least one rank"
        )
    return str(gathered[0][0]), merged


def _conflict_message(conflicts: dict[str, list[int]]) -> str:
    keys = "; ".join(f"{path} given by ranks {ranks}" for path, ranks in sorted(conflicts.items()))
    return (
        "sharded checkpoint: ranks gave different values for the same metadata key "
        f"({keys}); give each key on one rank only, or the same value on every rank"
    )


def write_metadata(path: pathlib.Path, metadata: dict[str, Any]) -> None:
    """Write ``metadata`` as ``path/metadata.json`` (sorted keys, indented)."""
    with open(path / METADATA_FILE, "w", encoding="utf-8") as fh:
        json.dump(metadata, fh, indent=2, sort_keys=True)
