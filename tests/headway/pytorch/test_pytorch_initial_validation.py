"""``perform_initial_validation`` on the cluster: the step-zero validation comes before the
first searcher operation is trained, and must not trip the Core API's warning for scripts that
never ask for their searcher operations (which still warns the scripts it is meant for)."""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

import pytest
import torch
from torch import nn

from headway import core, pytorch
from headway.pytorch import DataLoader, PyTorchTrial, PyTorchTrialContext
from tests.headway.core.test_core_managed import FakeRegistry, registry  # noqa: F401 - fixture

UNASKED = "without calling core_context.searcher.operations()"
HPARAMS = {"global_batch_size": 4}


class TinyTrial(PyTorchTrial):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(2, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), 0.1))

    def build_training_data_loader(self) -> DataLoader:
        x = torch.ones(16, 2)
        return DataLoader(torch.utils.data.TensorDataset(x, x[:, :1]), batch_size=4)

    def build_validation_data_loader(self) -> DataLoader:
        x = torch.ones(8, 2)
        return DataLoader(torch.utils.data.TensorDataset(x, x[:, :1]), batch_size=4)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        return {"validation_error": (self.model(x) - y).abs().mean()}


@pytest.fixture
def on_cluster(
    registry: tuple[FakeRegistry, str],  # noqa: F811 - the imported fixture
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[FakeRegistry, dict[str, Any]]:
    """A managed trial (cluster info naming the fake registry) under a searcher with
    ``max_length``: one that gives operations."""
    fake, url = registry
    conf = {
        "entrypoint": "model_def:Trial",
        "searcher": {"name": "single", "metric": "validation_error", "max_length": {"batches": 2}},
        "perform_initial_validation": True,
        "min_validation_period": {"batches": 1},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path / "ckpt")},
    }
    info = {
        "master_url": url,
        "token": "trial-token",
        "experiment_id": 1,
        "trial_id": 3,
        "run_id": 2,
        "hparams": HPARAMS,
        "trial_seed": 7,
        "latest_checkpoint": None,
        "experiment_config": conf,
    }
    path = tmp_path / "cluster-info.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    monkeypatch.chdir(tmp_path)  # the model directory checkpoints snapshot as code/
    return fake, conf


def test_initial_validation_does_not_warn_about_unasked_operations(
    on_cluster: tuple[FakeRegistry, dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    fake, conf = on_cluster
    caplog.set_level(logging.WARNING, logger="headway.core")
    with core.init() as cc:
        ctx = PyTorchTrialContext(
            cc, hparams=HPARAMS, exp_conf=conf, trial_seed=7, trial_id=3, run_id=2
        )
        pytorch.Trainer(TinyTrial(ctx), ctx).fit(step_zero_validation=True)
    validations = [
        r["steps_completed"]
        for body in fake.posts("/api/v1/trials/3/metrics/")
        for r in body["reports"]
        if r["group"] == "validation"
    ]
    assert validations[0] == 0  # the initial validation ran, before any batch
    assert fake.posts("/api/v1/trials/3/searcher/completed/")  # the operation was trained
    assert not [r for r in caplog.records if UNASKED in r.getMessage()]


def test_a_script_that_never_asks_for_operations_is_still_warned(
    on_cluster: tuple[FakeRegistry, dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="headway.core")
    with core.init() as cc:
        cc.train.report_validation_metrics(0, {"validation_error": 1.0})
        cc.train.report_validation_metrics(1, {"validation_error": 0.5})
    warned = [r for r in caplog.records if UNASKED in r.getMessage()]
    assert len(warned) == 1  # once, at the first validation
