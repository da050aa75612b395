"""A Hugging Face Trainer on a tiny BERT built from its config and integer-token data made here
(nothing downloaded): the script the ``DetCallback`` tests run."""

from __future__ import annotations

import pathlib
from typing import Any

import torch
import transformers


class ParityData(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """``n`` sequences of 8 tokens in [2, 10); the label is whether token 2 occurs an odd number
    of times (learnable, deterministic for a seed)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(2, 10, (n, 8), generator=g)
        self.labels = ((self.ids == 2).sum(dim=1) % 2).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def tiny_bert() -> transformers.PreTrainedModel:
    config = transformers.BertConfig(
        vocab_size=16,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


def accuracy(pred: transformers.EvalPrediction) -> dict[str, float]:
    return {"accuracy": float((pred.predictions.argmax(-1) == pred.label_ids).mean())}


def training_args(output_dir: pathlib.Path, **overrides: Any) -> transformers.TrainingArguments:
    """Arguments of a 12-step run: logs every 4 steps, evaluates and saves every 6."""
    values: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 12,
        "per_device_train_batch_size": 8,
        "per_device_eval_batch_size": 16,
        "learning_rate": 1e-3,
        "logging_strategy": "steps",
        "logging_steps": 4,
        "eval_strategy": "steps",
        "eval_steps": 6,
        "save_strategy": "steps",
        "save_steps": 6,
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "seed": 1,
        "dataloader_num_workers": 0,
    }
    values.update(overrides)
    return transformers.TrainingArguments(**values)


def trainer(
    args: transformers.TrainingArguments, callbacks: list[transformers.TrainerCallback]
) -> transformers.Trainer:
    return transformers.Trainer(
        model=tiny_bert(),
        args=args,
        train_dataset=ParityData(96, seed=1),
        eval_dataset=ParityData(32, seed=2),
        compute_metrics=accuracy,
        callbacks=callbacks,
    )
