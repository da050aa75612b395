"""Which Headway metric group a Lightning metric name belongs to (docs/decisions/sdk.md).

Lightning names a metric whatever the module passed to ``self.log``; with both ``on_step`` and
``on_epoch`` it logs two series, ``<name>_step`` and ``<name>_epoch``. Headway keeps every name
as written (so ``searcher.metric: val_loss`` names what the module logs) and only picks the
group from the name's prefix, the same prefixes the MLflow-compatible API reads:
``val_``, ``val/``, ``eval_``, ``eval/``, ``validation_``, ``validation/`` -> ``validation``;
``test_``, ``test/`` -> ``test``; anything else (``train_loss``, ``loss``, ``lr-SGD``) ->
``training``.
"""

from __future__ import annotations

VALIDATION_PREFIXES = ("val_", "val/", "eval_", "eval/", "validation_", "validation/")
TEST_PREFIXES = ("test_", "test/")


def metric_group(name: str) -> str:
    """The Headway group (``training``, ``validation`` or ``test``) of the Lightning metric
    ``name``, from its prefix (case-sensitive, as Lightning's names are).

    >>> metric_group("val_loss"), metric_group("val/acc_epoch"), metric_group("loss_step")
    ('validation', 'validation', 'training')
    """
    if name.startswith(VALIDATION_PREFIXES):
        return "validation"
    if name.startswith(TEST_PREFIXES):
        return "test"
    return "training"
