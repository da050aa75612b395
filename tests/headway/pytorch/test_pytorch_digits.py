"""The digits example learns: >= 0.90 validation accuracy locally on CPU."""

from __future__ import annotations

import pathlib
import sys

import pytest
import yaml

from headway import pytorch
from tests.helpers import REPO

pytestmark = pytest.mark.slow  # trains a CNN for minutes

DIGITS = REPO / "examples" / "digits"


@pytest.mark.parametrize("seed", [0, 1])
def test_digits_reaches_90_percent(tmp_path: pathlib.Path, monkeypatch, seed: int) -> None:
    monkeypatch.syspath_prepend(str(DIGITS))
    sys.modules.pop("model_def", None)
    import model_def

    conf = yaml.safe_load((DIGITS / "const.yaml").read_text())
    metric = conf["searcher"]["metric"]
    with pytorch.init(
        hparams=conf["hyperparameters"],
        exp_conf=conf,
        trial_seed=seed,
        checkpoint_storage=str(tmp_path),
    ) as ctx:
        pytorch.Trainer(model_def.DigitsTrial(ctx), ctx).fit(checkpoint_policy="none")
        validation = ctx._core.train.reported_metrics("validation")
    sys.modules.pop("model_def", None)
    # The config's searcher.max_length (epochs) and min_validation_period (batches) were used.
    assert validation[-1]["steps_completed"] == 10 * 45
    assert validation[-1]["metrics"][metric] >= 0.90
