"""Which Headway metric group a Lightning metric name belongs to (docs/decisions/sdk.md).

Lightning names a metric whatever the module passed to ``self.log``; with both ``on_step`` and
``on_epoch`` it logs two series, ``<name>_step`` and ``<name>_epoch``. Headway keeps every name
as written (so ``searcher.metric: val_loss`` names what the module logs) and only picks the
group from the name's first word: ``val``/``valid``/``validation`` -> ``validation``,
``test`` -> ``test``, anything else -> ``training``. The word ends at ``_``, ``/`` or ``-``.
"""

from __future__ import annotations

import re

# "val_loss", "val/acc", "validation-loss", "valid_f1" ... but not "value" or "vals".
_PREFIX = re.compile(r"^(?P<word>[A-Za-z]+)(?:[_/\-]|$)")
_GROUPS = {
    "val": "validation",
    "valid": "validation",
    "validation": "validation",
    "test": "test",
    "train": "training",
    "training": "training",
}


def metric_group(name: str) -> str:
    """The Headway group (``training``, ``validation`` or ``test``) of the Lightning metric
    ``name``: from its first word, case-insensitive; ``training`` when none matches.

    >>> metric_group("val_loss"), metric_group("val/acc_epoch"), metric_group("loss_step")
    ('validation', 'validation', 'training')
    """
    match = _PREFIX.match(name)
    if match is None:
        return "training"
    return _GROUPS.get(match.group("word").lower(), "training")
