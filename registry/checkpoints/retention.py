"""The retention policy: which checkpoints of an experiment to keep (pure, no Django).

Determined's checkpoint GC: keep the union of each trial's ``save_trial_latest`` latest
checkpoints (by ``steps_completed``), each trial's ``save_trial_best`` best and the experiment's
``save_experiment_best`` best, where "best" ranks by the searcher metric of the validation
reported at the checkpoint's ``steps_completed`` (``smaller_is_better`` decides the direction).

A checkpoint with no validation at its step (or a NaN searcher metric) has nothing to rank by:
it never fills a "best" slot and is kept only as one of the latest (or by a protection the caller
adds). Determined orders such checkpoints last (``NULLS LAST``), so they can fill spare best
slots there; here "best" always means measured best (docs/checkpoints.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

RETENTION_FIELDS = ("save_experiment_best", "save_trial_best", "save_trial_latest")


@dataclass(frozen=True)
class RetentionPolicy:
    """How many checkpoints to keep (``checkpoint_storage.save_*``; defaults are Determined's)."""

    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    @classmethod
    def from_storage_config(cls, storage: Mapping[str, Any]) -> RetentionPolicy | None:
        """The policy of a stored ``checkpoint_storage`` dict, or None to keep everything.

        Configs validated since retention exists always carry the three fields (defaults
        filled); a stored config with none of them predates retention, whose experiments were
        promised that every checkpoint is kept, so they are not collected.
        """
        if not any(name in storage for name in RETENTION_FIELDS):
            return None
        defaults = cls()
        return cls(
            **{name: int(storage.get(name, getattr(defaults, name))) for name in RETENTION_FIELDS}
        )


@dataclass(frozen=True)
class CheckpointFacts:
    """What the policy needs to know of one checkpoint.

    Attributes:
        uuid (str): the checkpoint's id.
        trial_id (int): its trial.
        steps_completed (int): batches trained when it was taken.
        created_at (datetime): tie-break between checkpoints of one step (newer first).
        searcher_value (float | None): the searcher metric of the validation at its step; None
            when there is none or it is not a finite number.
    """

    uuid: str
    trial_id: int
    steps_completed: int
    created_at: datetime
    searcher_value: float | None


def rankable(value: float | None) -> bool:
    """Whether a searcher metric value can rank a checkpoint (a number that is not NaN)."""
    return value is not None and not math.isnan(value)


def best_first(
    checkpoints: Iterable[CheckpointFacts], smaller_is_better: bool
) -> list[CheckpointFacts]:
    """The checkpoints that have a searcher metric, best first (ties: later step, then newer)."""
    sign = 1.0 if smaller_is_better else -1.0
    ranked = [c for c in checkpoints if rankable(c.searcher_value)]
    return sorted(
        ranked,
        key=lambda c: (
            sign * (c.searcher_value or 0.0),
            -c.steps_completed,
            -c.created_at.timestamp(),
        ),
    )


def latest_first(checkpoints: Iterable[CheckpointFacts]) -> list[CheckpointFacts]:
    """The checkpoints by ``steps_completed``, then creation time, newest first."""
    return sorted(checkpoints, key=lambda c: (c.steps_completed, c.created_at), reverse=True)


def checkpoints_to_keep(
    checkpoints: Iterable[CheckpointFacts], policy: RetentionPolicy, *, smaller_is_better: bool
) -> set[str]:
    """The uuids ``policy`` keeps among one experiment's live checkpoints.

    Arguments:
        checkpoints: every checkpoint of the experiment still in storage (COMPLETED).
        policy: the experiment's retention numbers.
        smaller_is_better: the searcher's direction.

    Returns:
        The union of each trial's ``save_trial_latest`` latest, each trial's
        ``save_trial_best`` best and the experiment's ``save_experiment_best`` best. Protections
        (model versions, warm-start sources, a running trial's latest) are the caller's.
    """
    items = list(checkpoints)
    by_trial: dict[int, list[CheckpointFacts]] = defaultdict(list)
    for item in items:
        by_trial[item.trial_id].append(item)
    keep: set[str] = set()
    for trial_items in by_trial.values():
        keep.update(c.uuid for c in latest_first(trial_items)[: policy.save_trial_latest])
        keep.update(
            c.uuid for c in best_first(trial_items, smaller_is_better)[: policy.save_trial_best]
        )
    keep.update(c.uuid for c in best_first(items, smaller_is_better)[: policy.save_experiment_best])
    return keep
