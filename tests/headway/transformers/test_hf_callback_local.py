"""``DetCallback`` with a local Core API context (no registry): what it reports and saves, its
filters, the forced save at the end, and the searcher-length checks."""

from __future__ import annotations

import pathlib

import pytest
from transformers import TrainingArguments

from headway import core
from headway.transformers import DetCallback
from headway.transformers._searcher import check_searcher_length, required_metrics
from tests.headway.transformers import tiny_trainer


@pytest.fixture
def ctx(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HEADWAY_CLUSTER_INFO", raising=False)
    monkeypatch.chdir(tmp_path)
    with core.init(checkpoint_storage=str(tmp_path / "checkpoints")) as context:
        yield context


def reports(ctx: core.Context, group: str) -> dict[int, dict]:
    """The reports of ``group`` merged per step, as the registry stores them."""
    out: dict[int, dict] = {}
    for r in ctx.train.reported_metrics(group):
        out.setdefault(r["steps_completed"], {}).update(r["metrics"])
    return out


def test_epochs_filters_and_a_save_forced_at_the_end(ctx, tmp_path: pathlib.Path) -> None:
    args = tiny_trainer.training_args(
        tmp_path / "out",
        max_steps=-1,
        num_train_epochs=2,
        eval_strategy="epoch",
        save_strategy="no",
        logging_steps=6,
    )
    wanted = ["loss"]
    callback = DetCallback(ctx, args, filter_metrics=wanted)
    assert args.resume_from_checkpoint is None  # nothing to resume in local mode
    hf = tiny_trainer.trainer(args, [callback])
    hf.train()
    hf.evaluate(metric_key_prefix="test")
    assert wanted == ["loss"]  # the caller's list is left alone
    training = reports(ctx, "training")
    assert list(training) == [6, 12, 18, 24]
    assert set(training[6]) == {"loss", "batches", "epochs"}
    assert set(training[24]) == {"loss", "train_loss", "batches", "epochs"}  # merged here
    assert training[12]["epochs"] == pytest.approx(1.0)
    assert list(reports(ctx, "validation")) == [12, 24]
    assert set(reports(ctx, "validation")[12]) == {"eval_loss", "batches", "epochs"}
    assert set(reports(ctx, "test")[24]) == {"test_loss", "batches", "epochs"}
    # save_strategy "no", yet training ends with a checkpoint of its last step.
    (state,) = (tmp_path / "checkpoints").glob("*/checkpoint-*/trainer_state.json")
    assert state.parent.name == "checkpoint-24"
    assert '"steps_completed": 24' in (state.parent.parent / "metadata.json").read_text()


def args_of(**kwargs) -> TrainingArguments:
    return TrainingArguments(output_dir="unused", report_to=[], use_cpu=True, **kwargs)


def searcher(**fields):
    """A validated searcher config (``single`` unless ``name`` says otherwise)."""
    from headway.expconf import parse_experiment_config

    fields = {"name": "single", "metric": "eval_loss", **fields}
    return parse_experiment_config({"entrypoint": "python train.py", "searcher": fields}).searcher


def test_the_trainer_length_must_be_the_searchers() -> None:
    assert check_searcher_length(searcher(), args_of(max_steps=10)) is None
    batches = searcher(max_length={"batches": 10})
    length = check_searcher_length(batches, args_of(max_steps=10))
    assert length is not None and length.value == 10
    epochs = searcher(max_length={"epochs": 3})
    assert check_searcher_length(epochs, args_of(num_train_epochs=3)) is not None
    with pytest.raises(ValueError, match=r"max_length \(batches: 10\).*--max_steps \(batches: 20"):
        check_searcher_length(batches, args_of(max_steps=20))
    with pytest.raises(ValueError, match="--num_train_epochs"):
        check_searcher_length(batches, args_of(num_train_epochs=10))
    asha = searcher(name="adaptive_asha", max_trials=2, time_metric="batches", max_time=50)
    assert check_searcher_length(asha, args_of(max_steps=50)) is None
    with pytest.raises(ValueError, match=r"searcher.max_time \(batches: 50\)"):
        check_searcher_length(asha, args_of(max_steps=40))


def test_the_searchers_metrics_are_required() -> None:
    assert required_metrics(None) == []
    assert required_metrics(searcher()) == ["eval_loss"]
    asha = searcher(name="adaptive_asha", max_trials=2, time_metric="eval_samples", max_time=9)
    assert required_metrics(asha) == ["eval_loss", "eval_samples"]
    timed = searcher(name="adaptive_asha", max_trials=2, time_metric="batches", max_time=9)
    assert required_metrics(timed) == ["eval_loss"]
