"""A trial written for Determined runs unchanged (imports aside) on Headway's harness."""

from __future__ import annotations

import json
import pathlib
import sys

import torch

from headway import pytorch
from tests.helpers import REPO

FIXTURE = REPO / "tests" / "fixtures" / "determined_port"


def test_it_runs_a_ported_determined_trial(tmp_path: pathlib.Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURE))
    sys.modules.pop("model_def", None)
    import model_def

    hparams = {"global_batch_size": 8, "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}
    conf = {"searcher": {"metric": "validation_loss", "smaller_is_better": True}}
    with pytorch.init(hparams=hparams, exp_conf=conf, checkpoint_storage=str(tmp_path)) as ctx:
        trial = model_def.PortedTrial(ctx)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(
            max_length=pytorch.Epoch(3),
            validation_period=pytorch.Epoch(1),
            checkpoint_period=pytorch.Batch(10),
            reporting_period=pytorch.Batch(4),
        )
        training = ctx._core.train.reported_metrics("training")
        validation = ctx._core.train.reported_metrics("validation")
    sys.modules.pop("model_def", None)

    assert [r["steps_completed"] for r in validation] == [8, 16, 24]
    assert set(validation[-1]["metrics"]) == {"validation_loss", "accuracy"}
    assert {"loss", "top1"} == set(training[-1]["metrics"])
    assert training[-1]["steps_completed"] == 24
    assert validation[-1]["metrics"]["accuracy"] > 0.6

    ckpt = tmp_path / str(trainer.latest_checkpoint)
    assert json.loads((ckpt / "metadata.json").read_text())["steps_completed"] == 24
    state = torch.load(ckpt / "state-dict.pth", weights_only=False)
    assert state["callbacks"] == {"epoch_counter": {"epochs": 3}}
    assert state["lr_schedulers_state_dict"][0]["last_epoch"] == 3
    assert state["optimizers_state_dict"][0]["param_groups"][0]["momentum"] == 0.9
    assert abs(trial.optimizer.param_groups[0]["lr"] - 0.01) < 1e-9  # stepped at epoch 2
