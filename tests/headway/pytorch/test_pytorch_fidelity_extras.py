"""Determined fidelity extras of the PyTorch harness: TensorBoard, profiler, AMP, code/ and
load_data.json in checkpoints, load_trial_from_checkpoint_path, import_from_path, LOG_FORMAT and
the local Core API searcher."""

from __future__ import annotations

import json
import logging
import pathlib
import sys
import textwrap
from typing import Any

import pytest
import torch

import headway
from headway import core, pytorch
from headway.pytorch import Batch

MODEL_DEF = textwrap.dedent(
    """
    import torch
    from torch import nn

    from headway import pytorch


    class TinyTrial(pytorch.PyTorchTrial):
        def __init__(self, context, amp=False, tb=True, profile=False):
            self.context = context
            if amp:
                context.experimental.use_amp()
            self.model = context.wrap_model(nn.Linear(4, 2))
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))
            self.writer = context.get_tensorboard_writer() if tb else None
            if profile:
                context.set_profiler(
                    activities=[torch.profiler.ProfilerActivity.CPU],
                    schedule=torch.profiler.schedule(wait=0, warmup=1, active=2, repeat=1),
                )
            self.dtypes = []

        def _data(self):
            gen = torch.Generator().manual_seed(0)
            x = torch.randn(64, 4, generator=gen)
            y = (x[:, 0] > 0).long()
            return torch.utils.data.TensorDataset(x, y)

        def build_training_data_loader(self):
            return pytorch.DataLoader(self._data(), batch_size=8)

        def build_validation_data_loader(self):
            return pytorch.DataLoader(self._data(), batch_size=8)

        def train_batch(self, batch, epoch_idx, batch_idx):
            x, y = batch
            out = self.model(x)
            self.dtypes.append(out.dtype)
            loss = nn.functional.cross_entropy(out, y)
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            if self.writer is not None:
                self.writer.add_scalar("my_loss", loss.item(), batch_idx)
            return {"loss": loss}

        def evaluate_batch(self, batch):
            x, y = batch
            return {"val_loss": nn.functional.cross_entropy(self.model(x), y)}
    """
)


@pytest.fixture
def model_def(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Import ``tiny_model_def`` from a model directory (like a user's model_def.py)."""
    code = tmp_path / "model"
    code.mkdir()
    (code / "tiny_model_def.py").write_text(MODEL_DEF)
    (code / "README.txt").write_text("not python\n")
    monkeypatch.syspath_prepend(str(code))
    sys.modules.pop("tiny_model_def", None)
    import tiny_model_def  # type: ignore[import-not-found]

    yield tiny_model_def
    sys.modules.pop("tiny_model_def", None)


def _fit(tmp_path: pathlib.Path, trial_cls: Any, batches: int = 4, **trial_kwargs: Any) -> Any:
    hparams = {"global_batch_size": 8, "lr": 0.1}
    with pytorch.init(hparams=hparams, checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        trial = trial_cls(ctx, **trial_kwargs)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(max_length=Batch(batches), checkpoint_period=Batch(2))
    return trial, trainer, tmp_path / "ckpts" / str(trainer.latest_checkpoint)


def _event_scalars(folder: pathlib.Path, tag: str) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values: list[float] = []
    for file in sorted(folder.rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(file))
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            values += [e.value for e in acc.Scalars(tag)]
    return values


# -- TensorBoard --------------------------------------------------------------------------------


def test_tensorboard_writer_files_travel_inside_checkpoints(
    tmp_path: pathlib.Path, model_def: Any
) -> None:
    trial, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial)
    tb_path = trial.context.get_tensorboard_path()
    assert trial.context.get_tensorboard_writer() is trial.writer
    assert any(tb_path.glob("events.out.tfevents.*"))
    assert len(_event_scalars(ckpt_dir / "tensorboard", "my_loss")) == 4


def test_a_resumed_trial_keeps_its_tensorboard_history(
    tmp_path: pathlib.Path, model_def: Any
) -> None:
    _, first, _ = _fit(tmp_path, model_def.TinyTrial, batches=2)
    hparams = {"global_batch_size": 8, "lr": 0.1}
    with pytorch.init(hparams=hparams, checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        trial = model_def.TinyTrial(ctx)
        trainer = pytorch.Trainer(trial, ctx)
        trainer.fit(max_length=Batch(4), latest_checkpoint=first.latest_checkpoint)
    final = tmp_path / "ckpts" / str(trainer.latest_checkpoint) / "tensorboard"
    assert len(_event_scalars(final, "my_loss")) == 4  # 2 from the first run, 2 after resume


# -- profiler -----------------------------------------------------------------------------------


def test_set_profiler_traces_are_stored_with_the_checkpoint(
    tmp_path: pathlib.Path, model_def: Any
) -> None:
    trial, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial, tb=False, profile=True)
    traces = list((ckpt_dir / "tensorboard").rglob("*.pt.trace.json*"))
    assert traces, list(ckpt_dir.rglob("*"))
    # The harness removed its step hook: train_batch is the class's method again.
    assert "train_batch" not in vars(trial)


def test_set_profiler_refuses_on_trace_ready(tmp_path: pathlib.Path, model_def: Any) -> None:
    with (
        pytorch.init(hparams={"global_batch_size": 8}) as ctx,
        pytest.raises(ValueError, match="on_trace_ready"),
    ):
        ctx.set_profiler(on_trace_ready=print)


def test_profiling_enabled_reports_system_metrics(model_def: Any) -> None:
    from headway.pytorch._profiler import SystemMetricsSampler

    with pytorch.init(hparams={"global_batch_size": 8}) as ctx:
        with SystemMetricsSampler(ctx, interval=0.1, samples_per_report=2) as sampler:
            while not ctx._core.train.reported_metrics("profiling"):
                sampler._stop.wait(0.05)
        report = ctx._core.train.reported_metrics("profiling")[0]
    assert set(report["metrics"]) == {"cpu_util_simple", "memory_free"}
    assert 0.0 <= report["metrics"]["cpu_util_simple"] <= 100.0
    with pytest.raises(ValueError, match="samples_per_report"):
        SystemMetricsSampler(ctx, samples_per_report=0)


def test_fit_accepts_profiling_enabled(tmp_path: pathlib.Path, model_def: Any) -> None:
    with pytorch.init(hparams={"global_batch_size": 8}, checkpoint_storage=str(tmp_path)) as ctx:
        trainer = pytorch.Trainer(model_def.TinyTrial(ctx, tb=False), ctx)
        trainer.configure_profiler(enabled=True)
        trainer.fit(max_length=Batch(2), profiling_enabled=True)
        assert trainer.latest_checkpoint is not None


# -- AMP ----------------------------------------------------------------------------------------


def test_use_amp_runs_the_forward_pass_in_bfloat16_on_cpu(
    tmp_path: pathlib.Path, model_def: Any
) -> None:
    trial, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial, amp=True, tb=False)
    # Outputs come back as float32 (losses are computed outside autocast) ...
    assert trial.dtypes and set(trial.dtypes) == {torch.float32}
    # ... while the matmul inside ran in bfloat16.
    inner: list[torch.dtype] = []

    class Probe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.fc(x)
            inner.append(out.dtype)
            return out

    with pytorch.init(hparams={"global_batch_size": 8}) as ctx:
        ctx.experimental.use_amp()
        probe = ctx.wrap_model(Probe())
        assert isinstance(probe, Probe)  # still the user's class (attributes work)
        assert probe(torch.randn(2, 4)).dtype == torch.float32
    assert inner == [torch.bfloat16]
    state = torch.load(ckpt_dir / pytorch.STATE_FILE, weights_only=False)
    assert len(state["scalers_state_dict"]) == 1


def test_use_amp_after_wrap_model_is_rejected() -> None:
    with pytorch.init(hparams={"global_batch_size": 8}) as ctx:
        ctx.wrap_model(torch.nn.Linear(2, 2))
        with pytest.raises(RuntimeError, match="use_amp"):
            ctx.experimental.use_amp()


def test_configure_apex_amp_is_rejected_by_name_unless_disabled() -> None:
    with pytorch.init(hparams={"global_batch_size": 8}) as ctx:
        model = ctx.wrap_model(torch.nn.Linear(2, 2))
        assert ctx.configure_apex_amp(model, None, enabled=False) == (model, None)
        with pytest.raises(RuntimeError, match="configure_apex_amp"):
            ctx.configure_apex_amp(model, None)
    # Outside training (loading a checkpoint) it is a pass-through, as in Determined.
    load_ctx = pytorch.CheckpointLoadContext()
    assert load_ctx.configure_apex_amp("m", "o") == ("m", "o")


# -- code/, load_data.json, load_trial_from_checkpoint_path -------------------------------------


def test_checkpoints_hold_model_code_and_load_data(tmp_path: pathlib.Path, model_def: Any) -> None:
    _, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial, tb=False)
    assert (ckpt_dir / "code" / "tiny_model_def.py").read_text() == MODEL_DEF
    assert (ckpt_dir / "code" / "README.txt").exists()
    assert not list((ckpt_dir / "code").rglob("__pycache__"))
    load_data = json.loads((ckpt_dir / "load_data.json").read_text())
    assert load_data["trial_type"] == "PyTorchTrial"
    assert load_data["trial_cls_spec"] == "tiny_model_def:TinyTrial"
    assert load_data["hparams"] == {"global_batch_size": 8, "lr": 0.1}
    assert load_data["is_trainer"] is True


def test_load_trial_from_checkpoint_path_imports_the_class_from_code(
    tmp_path: pathlib.Path, model_def: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial, tb=False)
    # Forget the module, as in a fresh interpreter that never saw the model directory.
    monkeypatch.delitem(sys.modules, "tiny_model_def")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "model" not in p])
    loaded = pytorch.load_trial_from_checkpoint_path(
        str(ckpt_dir), trial_kwargs={"tb": False}, torch_load_kwargs={"map_location": "cpu"}
    )
    assert type(loaded).__name__ == "TinyTrial"
    assert type(loaded) is not model_def.TinyTrial  # imported anew from code/
    assert loaded.context.get_hparams() == {"global_batch_size": 8, "lr": 0.1}
    assert isinstance(loaded.context, pytorch.CheckpointLoadContext)
    for a, b in zip(trained.model.parameters(), loaded.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert "tiny_model_def" not in sys.modules  # import_from_path cleaned up


def test_load_trial_kwargs_are_deprecated_and_exclusive(
    tmp_path: pathlib.Path, model_def: Any
) -> None:
    _, _, ckpt_dir = _fit(tmp_path, model_def.TinyTrial, tb=False)
    with pytest.warns(FutureWarning, match="torch_load_kwargs"):
        pytorch.load_trial_from_checkpoint_path(
            ckpt_dir, model_def.TinyTrial, {"tb": False}, map_location="cpu"
        )
    with pytest.raises(ValueError, match="torch_load_kwargs"):
        pytorch.load_trial_from_checkpoint_path(
            ckpt_dir, model_def.TinyTrial, None, {"map_location": "cpu"}, map_location="cpu"
        )


def test_load_without_load_data_needs_trial_class(tmp_path: pathlib.Path) -> None:
    (tmp_path / pytorch.STATE_FILE).write_bytes(b"")
    with pytest.raises(ValueError, match="trial_class"):
        pytorch.load_trial_from_checkpoint_path(tmp_path)


# -- import_from_path, LOG_FORMAT ---------------------------------------------------------------


def test_import_from_path_imports_two_same_named_modules(tmp_path: pathlib.Path) -> None:
    for version in ("old", "new"):
        (tmp_path / version).mkdir()
        (tmp_path / version / "hw_versioned.py").write_text(f"VERSION = {version!r}\n")
    with headway.import_from_path(tmp_path / "old"):
        import hw_versioned as old  # type: ignore[import-not-found]
    with headway.import_from_path(tmp_path / "new"):
        import hw_versioned as new  # type: ignore[import-not-found]
    assert (old.VERSION, new.VERSION) == ("old", "new")
    assert "hw_versioned" not in sys.modules
    assert not list(tmp_path.rglob("__pycache__"))
    with (
        headway.import_from_path(tmp_path / "old"),
        pytest.raises(RuntimeError, match="nesting"),
        headway.import_from_path(tmp_path / "new"),
    ):
        pass


def test_log_format_is_determineds() -> None:
    assert headway.LOG_FORMAT == "%(levelname)s: [%(process)s] %(name)s: %(message)s"
    record = logging.LogRecord("x.y", logging.INFO, __file__, 1, "hello", None, None)
    assert logging.Formatter(headway.LOG_FORMAT).format(record).endswith("x.y: hello")


# -- local Core API searcher --------------------------------------------------------------------


def test_local_core_searcher_yields_one_operation_of_length_one() -> None:
    with core.init() as ctx:
        assert ctx.searcher.get_configured_units() is core.Unit.EPOCHS
        ops = []
        for op in ctx.searcher.operations():
            ops.append(op.length)
            op.report_progress(1)
            op.report_completed(0.5)
    assert ops == [1]
