"""Which Headway group a Lightning metric name goes to (headway.lightning.metric_group)."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from headway.lightning import metric_group


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("val_loss", "validation"),
        ("val/acc", "validation"),
        ("val_loss_epoch", "validation"),
        ("eval_loss", "validation"),
        ("validation_loss", "validation"),
        ("validation/loss", "validation"),
        ("test_acc", "test"),
        ("test/acc", "test"),
        ("train_loss_step", "training"),
        ("train/loss", "training"),
        ("loss", "training"),
        ("value_loss", "training"),  # "value" is not "val"
        ("val", "training"),  # a prefix needs its separator
        ("VAL_loss", "training"),  # case-sensitive, as the MLflow-compatible API
        ("valid_f1", "training"),
        ("lr-SGD", "training"),
    ],
)
def test_group_comes_from_the_prefix(name: str, group: str) -> None:
    assert metric_group(name) == group


def test_import_headway_does_not_import_lightning() -> None:
    import subprocess
    import sys

    code = "import sys, headway, headway.core; print('lightning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
