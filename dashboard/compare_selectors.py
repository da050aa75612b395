"""What the compare page (``dashboard.views.compare``) reads: the ticked trial ids from the query
string and the diff of their hyperparameters."""

from __future__ import annotations

from typing import Any

from dashboard.selectors import flatten_hparams
from registry.models import Trial

MAX_COMPARED = 50


def parse_trial_ids(values: list[str]) -> tuple[list[int], list[str]]:
    """The distinct positive trial ids in ``values`` (first-seen order) and the errors found.

    Each value may hold several ids separated by commas or spaces (``"3, 7 9"``).
    """
    ids: list[int] = []
    errors: list[str] = []
    for value in values:
        for part in value.replace(",", " ").split():
            if not part.isdigit() or int(part) <= 0:
                errors.append(f"trial: {part!r} is not a trial id (a positive integer).")
            elif int(part) not in ids:
                ids.append(int(part))
    if len(ids) > MAX_COMPARED:
        errors.append(f"trial: at most {MAX_COMPARED} trials can be compared at once.")
        ids = ids[:MAX_COMPARED]
    return ids, errors


def hparam_diff(trials: list[Trial]) -> list[dict[str, Any]]:
    """One row per flattened hyperparameter: ``{"name", "values" (per trial, None if absent),
    "differs"}``; rows whose values differ come first, then by name."""
    flat = [dict(flatten_hparams(t.hparams)) for t in trials]
    names = sorted({name for hp in flat for name in hp})
    rows = []
    for name in names:
        values = [hp.get(name) for hp in flat]
        differs = len({repr(v) for v in values}) > 1 or any(name not in hp for hp in flat)
        rows.append({"name": name, "values": values, "differs": differs})
    rows.sort(key=lambda r: (not r["differs"], r["name"]))
    return rows
