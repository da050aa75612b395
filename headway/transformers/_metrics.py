"""What ``DetCallback.on_log`` reports: the Trainer's log split into a metric group.

Determined's ``harness/determined/transformers/_hf_callback.py`` sorts a log by its keys'
prefixes (``eval_`` → validation, anything else → training) and matches ``filter_metrics`` as
substrings of the names; Headway does the same, keeps the speed metrics Determined drops (they
are numbers the Trainer logged) and reports ``test_`` logs in a ``test`` group rather than
dropping them (docs/decisions/sdk.md).
"""

from __future__ import annotations

import numbers
from typing import Any

TRAINING = "training"
VALIDATION = "validation"
TEST = "test"


def metric_group(logs: dict[str, Any]) -> str:
    """The group of one ``Trainer.log`` call: ``validation`` when a key starts with ``eval_``,
    ``test`` when one starts with ``test_``, else ``training``."""
    if any(k.startswith("eval_") for k in logs):
        return VALIDATION
    if any(k.startswith("test_") for k in logs):
        return TEST
    return TRAINING


def select_metrics(
    logs: dict[str, Any], filter_metrics: list[str] | None, steps: int, epoch: float | None
) -> dict[str, Any]:
    """The metrics to report from ``logs``.

    Arguments:
        logs: what the Trainer logged (name -> value).
        filter_metrics: keep only names containing one of these substrings; None keeps all.
        steps: ``state.global_step``, reported as ``batches``.
        epoch: ``state.epoch`` (fractional), reported as ``epochs``; the Trainer's rounded
            ``epoch`` key is dropped for it.

    Returns:
        The numeric values (bools and non-numbers left out, as a Trainer log holds none of
        interest), plus ``batches`` and ``epochs`` so that a searcher's ``time_metric`` of
        ``batches`` or ``epochs`` is found in every report.
    """
    out: dict[str, Any] = {}
    for name, value in logs.items():
        if name == "epoch" or isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        if filter_metrics and not any(f in name for f in filter_metrics):
            continue
        out[name] = value
    out["batches"] = steps
    if epoch is not None:
        out["epochs"] = float(epoch)
    return out
