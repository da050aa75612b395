"""Train the digits example locally, without a server, through ``headway.pytorch.init()``.

Run from the repository root: ``python examples/digits/train_local.py --epochs 10``.
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import sys
from typing import Any

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from model_def import DigitsTrial

from headway import pytorch


class _PrintValidation(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.last = metrics
        print(" ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())), flush=True)


class LocalDigitsTrial(DigitsTrial):
    """``DigitsTrial`` plus a callback that prints each validation."""

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        self.printer = _PrintValidation()
        return {"printer": self.printer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoints", default="var/digits-checkpoints")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    conf = yaml.safe_load((pathlib.Path(__file__).parent / "const.yaml").read_text())
    with pytorch.init(
        hparams=conf["hyperparameters"],
        exp_conf=conf,
        trial_seed=args.seed,
        checkpoint_storage=args.checkpoints,
    ) as context:
        trial = LocalDigitsTrial(context)
        trainer = pytorch.Trainer(trial, context)
        trainer.fit(max_length=pytorch.Epoch(args.epochs), validation_period=pytorch.Epoch(1))
        metric = conf["searcher"]["metric"]
        print(f"final {metric}: {trial.printer.last[metric]:.4f}")
        print(f"latest checkpoint: {trainer.latest_checkpoint} in {args.checkpoints}")


if __name__ == "__main__":
    main()
