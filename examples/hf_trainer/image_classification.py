#!/usr/bin/env python
# Copyright 2021 The HuggingFace Inc. team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Fine-tuning a 🤗 Transformers model for image classification, on Headway.

Determined's ``examples/hf_trainer_api/hf_image_classification`` (itself Hugging Face's
``run_image_classification.py``) with its imports changed (``determined`` → ``headway``) and,
so that it runs with nothing downloaded, a small ViT built from its config and scikit-learn's
8×8 digits in place of a hub checkpoint and the ``beans`` dataset. See README.md.
"""

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from transformers import (
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    ViTConfig,
    ViTForImageClassification,
)
from transformers.trainer_utils import get_last_checkpoint

import headway as det
from headway.transformers import DetCallback

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    """The model to train: a ViT of this size, made from its config (no pretrained weights)."""

    hidden_size: int = field(default=32, metadata={"help": "ViT hidden size."})
    num_hidden_layers: int = field(default=2, metadata={"help": "ViT layers."})
    num_attention_heads: int = field(default=2, metadata={"help": "Attention heads."})
    patch_size: int = field(default=2, metadata={"help": "Patch size in pixels (of 8)."})


@dataclass
class DataTrainingArguments:
    """The data: scikit-learn's digits (1,797 images of 8×8 pixels, 10 classes)."""

    train_val_split: float = field(
        default=0.2, metadata={"help": "Fraction of the images held out for evaluation."}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Truncate the training set to this many images."}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Truncate the evaluation set to this many images."}
    )


class Digits(torch.utils.data.Dataset):
    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        # 0..16 grey levels -> [-1, 1], one channel.
        self.pixels = torch.tensor(images, dtype=torch.float32).reshape(-1, 1, 8, 8) / 8.0 - 1.0
        self.labels = torch.tensor(labels, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"pixel_values": self.pixels[i], "labels": self.labels[i]}


def dict2args(hparams: dict[str, Any]) -> list:
    # Step through hparams and yield --key value pairs.
    out = []
    for key, value in hparams.items():
        out.extend([f"--{key}", str(value)])
    return out


def parse_input_arguments(
    hparams: dict[str, Any],
) -> tuple[ModelArguments, DataTrainingArguments, TrainingArguments]:
    training_arguments = hparams.get("training_arguments", {})
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    # 1. If your arguments are defined in a file:
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        args = json.loads(Path(os.path.abspath(sys.argv[1])).read_text())
        args.update(training_arguments)
        return parser.parse_dict(args)
    # 2. If your arguments are in sys.argv (the hyperparameters' training_arguments win):
    args = sys.argv[1:] + dict2args(training_arguments)
    return parser.parse_args_into_dataclasses(args, look_for_args_file=False)


def compute_metrics(p: transformers.EvalPrediction) -> dict[str, float]:
    """Computes accuracy on a batch of predictions."""
    return {"accuracy": float((np.argmax(p.predictions, axis=1) == p.label_ids).mean())}


def main(det_callback, model_args, data_args, training_args):
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        handlers=[logging.StreamHandler(sys.stdout)],
    )
    log_level = training_args.get_process_log_level()
    logger.setLevel(log_level)
    transformers.utils.logging.set_verbosity(log_level)

    # Detecting last checkpoint (the callback put the trial's latest one here on resume).
    last_checkpoint = None
    if os.path.isdir(training_args.output_dir) and training_args.do_train:
        last_checkpoint = get_last_checkpoint(training_args.output_dir)

    digits = load_digits()
    x_train, x_eval, y_train, y_eval = train_test_split(
        digits.images,
        digits.target,
        test_size=data_args.train_val_split,
        random_state=training_args.seed,
        stratify=digits.target,
    )
    if data_args.max_train_samples is not None:
        x_train, y_train = (
            x_train[: data_args.max_train_samples],
            y_train[: data_args.max_train_samples],
        )
    if data_args.max_eval_samples is not None:
        x_eval, y_eval = x_eval[: data_args.max_eval_samples], y_eval[: data_args.max_eval_samples]

    config = ViTConfig(
        image_size=8,
        patch_size=model_args.patch_size,
        num_channels=1,
        hidden_size=model_args.hidden_size,
        num_hidden_layers=model_args.num_hidden_layers,
        num_attention_heads=model_args.num_attention_heads,
        intermediate_size=2 * model_args.hidden_size,
        num_labels=10,
        id2label={i: str(i) for i in range(10)},
        label2id={str(i): i for i in range(10)},
    )
    model = ViTForImageClassification(config)

    # Initialize our trainer
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=Digits(x_train, y_train) if training_args.do_train else None,
        eval_dataset=Digits(x_eval, y_eval) if training_args.do_eval else None,
        compute_metrics=compute_metrics,
    )
    trainer.add_callback(det_callback)

    # Training
    if training_args.do_train:
        checkpoint = None
        if training_args.resume_from_checkpoint is not None:
            checkpoint = training_args.resume_from_checkpoint
        elif last_checkpoint is not None:
            checkpoint = last_checkpoint
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
        trainer.save_model()
        trainer.log_metrics("train", train_result.metrics)
        trainer.save_metrics("train", train_result.metrics)
        trainer.save_state()

    # Evaluation
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)


if __name__ == "__main__":
    info = det.get_cluster_info()
    # On the cluster the hyperparameters may override training arguments; locally there are none.
    hparams = info.trial.hparams if info else {}
    model_args, data_args, training_args = parse_input_arguments(hparams)

    # Several ranks when started by python -m headway.launch.torch_distributed (distributed.yaml).
    distributed = det.core.DistributedContext.from_launcher()
    with det.core.init(distributed=distributed) as core_context:
        # Optional user-defined data that is saved in the Headway checkpoint.
        user_data = {
            "tasks": "image-classification",
            "dataset": "sklearn-digits",
            "tags": ["image-classification", "vision"],
        }
        det_callback = DetCallback(
            core_context, training_args, filter_metrics=["loss", "accuracy"], user_data=user_data
        )
        main(det_callback, model_args, data_args, training_args)
