"""``Trainer.fit`` on the cluster under Determined 0.38 configs: without ``searcher.max_length``
the script's ``fit(max_length=)`` decides (required), a time-metric ASHA's ``max_time`` is the
default, and validations carry the time metric ASHA ranks by."""

from __future__ import annotations

import pathlib

import pytest

from headway import core, pytorch
from headway._info import ClusterInfo, TrialInfo
from headway.pytorch import Batch, PyTorchTrialContext
from tests.headway.pytorch.test_pytorch_loop import LinearTrial

HPARAMS = {"global_batch_size": 10}


def fit_on_cluster(tmp_path: pathlib.Path, searcher: dict, **fit: object):
    """Run ``fit`` with the real local Core API context presented as a managed one; return
    (batches trained, validation reports)."""
    conf = {
        "entrypoint": "python train.py",
        "searcher": searcher,
        "min_validation_period": {"batches": 2},
    }
    info = ClusterInfo(
        master_url="http://registry.invalid",
        token="t",
        trial=TrialInfo(
            trial_id=9, experiment_id=1, run_id=1, hparams=HPARAMS, trial_seed=3, config=conf
        ),
        latest_checkpoint=None,
    )
    with core.init(checkpoint_storage=str(tmp_path)) as cc:
        cc.info = info
        ctx = PyTorchTrialContext(
            cc, hparams=HPARAMS, exp_conf=conf, trial_seed=3, trial_id=9, run_id=1
        )
        trial = LinearTrial(ctx)
        pytorch.Trainer(trial, ctx).fit(checkpoint_policy="none", **fit)
        return len(trial.flags), cc.train.reported_metrics("validation")


def test_fit_max_length_decides_when_the_config_has_none(tmp_path: pathlib.Path) -> None:
    batches, validations = fit_on_cluster(
        tmp_path, {"name": "single", "metric": "validation_error"}, max_length=Batch(5)
    )
    assert batches == 5
    assert [r["steps_completed"] for r in validations] == [2, 4, 5]
    assert "batches" not in validations[0]["metrics"]  # only a time-metric search adds it


def test_fit_needs_a_length_when_the_config_has_none(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"fit\(max_length=...\) is required"):
        fit_on_cluster(tmp_path, {"name": "single", "metric": "validation_error"})


def test_time_metric_asha_gives_the_default_length_and_the_time_metric(
    tmp_path: pathlib.Path,
) -> None:
    searcher = {
        "name": "adaptive_asha",
        "metric": "validation_error",
        "max_trials": 2,
        "time_metric": "batches",
        "max_time": 4,
    }
    batches, validations = fit_on_cluster(tmp_path, searcher)
    assert batches == 4
    assert [(r["steps_completed"], r["metrics"]["batches"]) for r in validations] == [
        (2, 2),
        (4, 4),
    ]
