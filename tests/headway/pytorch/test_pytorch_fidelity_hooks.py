"""Determined 0.38.1 fidelity of the PyTorchTrial loop: hooks, evaluation, reducers.

Callback hooks at Determined's points (harness/determined/pytorch/_pytorch_trial.py, _callback.py),
``train_batch`` returning a bare tensor, test mode, ``evaluate_full_dataset`` and
``wrap_reducer`` (pytorch/_reducer.py). One process; two ranks are in
tests/headway/pytorch/test_pytorch_fidelity_ranks.py.
"""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from headway import pytorch
from headway.pytorch import Batch, DataLoader, PyTorchTrial, PyTorchTrialContext
from headway.pytorch._metrics import _FunctionReducer


def _loader(values: list[float], batch_size: int = 1) -> DataLoader:
    x = torch.tensor(values).reshape(-1, 1)
    return DataLoader(torch.utils.data.TensorDataset(x), batch_size=batch_size)


# -- 2. callback hooks -------------------------------------------------------------------------


class Recorder(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_validation_epoch_start(self) -> None:
        self.events.append(("val_epoch_start", None))

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        self.events.append(("val_epoch_end", outputs))

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.events.append(("val_end", None))

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["added_by_callback"] = 7  # must be saved
        self.events.append(("save_start", sorted(checkpoint)))

    def on_checkpoint_save(self, checkpoint_dir: str) -> None:
        self.events.append(("save", None))

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        names = sorted(p.name for p in pathlib.Path(checkpoint_dir).iterdir())
        self.events.append(("write_end", names))

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        self.events.append(("upload_end", uuid))

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        self.events.append(("load_start", checkpoint.get("added_by_callback")))

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        self.events.append(("load", None))


class CallbackTrial(PyTorchTrial):
    def __init__(self, context: PyTorchTrialContext) -> None:
        self.context = context
        self.model = context.wrap_model(nn.Linear(1, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
        self.recorder = Recorder()
        self.eval_calls = 0

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"rec": self.recorder}

    def build_training_data_loader(self) -> DataLoader:
        return _loader([1.0, 2.0, 3.0, 4.0])

    def build_validation_data_loader(self) -> DataLoader:
        return _loader([1.0, 2.0, 3.0], batch_size=1)

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> Any:
        (x,) = batch
        loss = self.model(x).pow(2).mean()
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return loss  # 7. a bare tensor is the loss

    def evaluate_batch(self, batch: Any) -> dict[str, Any]:
        self.eval_calls += 1
        (x,) = batch
        return {"validation_loss": self.model(x).pow(2).mean(), "x": x.sum()}


def test_checkpoint_and_validation_epoch_hooks_run_at_determined_points(
    tmp_path: pathlib.Path,
) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = CallbackTrial(ctx)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(max_length=Batch(2), checkpoint_policy="none")
        training = ctx._core.train.reported_metrics("training")
    events = trial.recorder.events
    names = [e for e, _ in events]
    assert names == [
        "val_epoch_start",
        "val_epoch_end",
        "val_end",
        "save_start",
        "save",
        "write_end",
        "upload_end",
    ]
    outputs = events[1][1]
    assert len(outputs) == 3
    assert all(isinstance(o["validation_loss"], np.ndarray) for o in outputs)
    assert [float(o["x"]) for o in outputs] == [1.0, 2.0, 3.0]
    assert "models_state_dict" in events[3][1]
    assert "state-dict.pth" in events[5][1]
    assert events[6][1] == trainer.latest_checkpoint
    # 7. train_batch returned a bare tensor: reported as "loss".
    assert list(training[-1]["metrics"]) == ["loss"]

    # Resume: on_checkpoint_load_start sees the saved dict (with the callback's addition)
    # before anything is restored, then Headway's on_checkpoint_load.
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial2 = CallbackTrial(ctx)
        pytorch.Trainer(trial2, ctx).fit(
            max_length=Batch(2), latest_checkpoint=trainer.latest_checkpoint
        )
    assert trial2.recorder.events[:2] == [("load_start", 7), ("load", None)]


def test_overriding_on_checkpoint_end_warns_and_it_is_called(tmp_path: pathlib.Path) -> None:
    class Old(pytorch.PyTorchCallback):
        def __init__(self) -> None:
            self.dirs: list[str] = []

        def on_checkpoint_end(self, checkpoint_dir: str) -> None:
            self.dirs.append(checkpoint_dir)

    old = Old()
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = CallbackTrial(ctx)
        trial.build_callbacks = lambda: {"old": old}  # type: ignore[method-assign]
        with pytest.warns(FutureWarning, match="on_checkpoint_write_end"):
            pytorch.Trainer(trial, ctx).fit(max_length=Batch(1))
    assert len(old.dirs) == 1


# -- 6. test mode ------------------------------------------------------------------------------


def test_test_mode_trains_one_batch_and_validates_one_batch(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = CallbackTrial(ctx)
        pytorch.Trainer(trial, ctx).fit(test_mode=True)
        steps = [r["steps_completed"] for r in ctx._core.train.reported_metrics("validation")]
    assert trial.eval_calls == 1
    assert steps == [1]
    assert any(e == "upload_end" for e, _ in trial.recorder.events)


# -- 3. evaluate_full_dataset ------------------------------------------------------------------


class FullTrial(CallbackTrial):
    evaluate_batch = PyTorchTrial.evaluate_batch  # type: ignore[assignment]

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        n = sum(len(x) for (x,) in data_loader)
        return {"records": n, "name": "full", "mean": torch.tensor(2.0)}


def test_evaluate_full_dataset_values_are_reported_as_returned(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = FullTrial(ctx)
        # test mode does not cut evaluate_full_dataset short (Determined neither).
        pytorch.Trainer(trial, ctx).fit(test_mode=True)
        (report,) = ctx._core.train.reported_metrics("validation")
    metrics = report["metrics"]
    assert metrics == {"records": 3, "name": "full", "mean": 2.0}
    assert type(metrics["records"]) is int


def test_both_evaluate_methods_are_refused(tmp_path: pathlib.Path) -> None:
    class Both(FullTrial):
        evaluate_batch = CallbackTrial.evaluate_batch  # type: ignore[assignment]

    with (
        pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx,
        pytest.raises(TypeError, match="exactly one"),
    ):
        pytorch.Trainer(Both(ctx), ctx).fit(max_length=Batch(1))


# -- 4. wrap_reducer ---------------------------------------------------------------------------


def _reducer_run(tmp_path: pathlib.Path, fn: Any, name: str | None) -> dict[str, Any]:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        trial = CallbackTrial(ctx)
        reducer = ctx.wrap_reducer(fn, name=name, for_training=False)
        original = trial.evaluate_batch

        def evaluate_batch(batch: Any) -> dict[str, Any]:
            reducer.update(float(batch[0].sum()))  # type: ignore[attr-defined]
            return original(batch)

        trial.evaluate_batch = evaluate_batch  # type: ignore[method-assign]
        pytorch.Trainer(trial, ctx).fit(max_length=Batch(1), checkpoint_policy="none")
        (report,) = ctx._core.train.reported_metrics("validation")
    return dict(report["metrics"])


def test_wrap_reducer_without_name_merges_the_returned_dict(tmp_path: pathlib.Path) -> None:
    metrics = _reducer_run(tmp_path, lambda vs: {"total": sum(vs), "count": len(vs)}, None)
    assert metrics["total"] == 6.0 and metrics["count"] == 3


def test_wrap_reducer_result_must_match_name(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="name=None"):
        _reducer_run(tmp_path, sum, None)
    with pytest.raises(ValueError, match="returned a dict"):
        _reducer_run(tmp_path, lambda vs: {"a": 1}, "a")


def test_wrap_reducer_refuses_double_wrapping_and_non_callables(tmp_path: pathlib.Path) -> None:
    with pytorch.init(hparams={"global_batch_size": 1}, checkpoint_storage=str(tmp_path)) as ctx:
        reducer = ctx.wrap_reducer(sum, name="s")
        with pytest.raises(ValueError, match="already wrapped"):
            ctx.wrap_reducer(reducer, name="t")
        with pytest.raises(TypeError, match="MetricReducer or a function"):
            ctx.wrap_reducer(42, name="x")  # type: ignore[arg-type]


def test_function_reducer_interleaves_slots() -> None:
    # Determined's _SimpleReducer: rank 0's first value, rank 1's first, ... (dataset order).
    reducer = _FunctionReducer(list)
    assert reducer.cross_slot_reduce([[0, 2, 4], [1, 3]]) == [0, 1, 2, 3, 4]
