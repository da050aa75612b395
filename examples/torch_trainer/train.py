"""RaySGD's TorchTrainer example (``ray/util/sgd/torch/examples/train_example.py``) on Headway.

The RaySGD program ports by changing its imports; ``train_example()`` below is that program:
a linear model learning ``y = 2x + 5`` on generated data, trained data-parallel by two worker
processes with a global batch of 64 (32 per worker).

``main()`` runs the same trainer as a Headway experiment with a few Core API calls in the
driver: it reports each epoch's training and validation averages, stores ``trainer.save()`` as a
checkpoint after each epoch, resumes from the latest checkpoint (``trainer.load()``), trains as
long as the searcher says (``max_length`` in epochs) and stops cleanly when paused.

    python train.py               # local mode: ./checkpoints, one epoch (the Core API default)
    python train.py --seed-only   # just the RaySGD example, printing its stats as JSON
    headway experiment create torch_trainer.yaml .   # on a cluster
"""

import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn

import headway
from headway import core
from headway.torch_trainer import BATCH_SIZE, TorchTrainer, TrainingOperator


class LinearDataset(torch.utils.data.Dataset):
    """y = a * x + b"""

    def __init__(self, a, b, size=1000):
        x = np.arange(0, 10, 10 / size, dtype=np.float32)
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy(a * x + b)

    def __getitem__(self, index):
        return self.x[index, None], self.y[index, None]

    def __len__(self):
        return len(self.x)


class MyTrainingOperator(TrainingOperator):
    def setup(self, config):
        # Setup data.
        batch_size = config[BATCH_SIZE]
        train_dataset = LinearDataset(2, 5, size=config.get("data_size", 1000))
        val_dataset = LinearDataset(2, 5, size=config.get("val_size", 400))
        train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=batch_size)
        validation_loader = torch.utils.data.DataLoader(val_dataset, batch_size=batch_size)
        self.register_data(train_loader=train_loader, validation_loader=validation_loader)

        # Setup model.
        torch.manual_seed(config.get("seed", 0))
        model = nn.Linear(1, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 1e-2))
        loss = nn.MSELoss()
        self.model, self.optimizer, self.criterion = self.register(
            models=model, optimizers=optimizer, criterion=loss
        )

    def train_batch(self, batch, batch_info):
        # Optional slowness, so that a test can pause the experiment mid-training.
        time.sleep(self.config.get("batch_sleep", 0.0))
        return super().train_batch(batch, batch_info)


def train_example(num_workers=2, use_gpu=False, epochs=5, lr=1e-2, global_batch_size=64):
    """The RaySGD example: train, validate, print the model's weight and bias."""
    trainer = TorchTrainer(
        training_operator_cls=MyTrainingOperator,
        num_workers=num_workers,
        use_gpu=use_gpu,
        config={"lr": lr, BATCH_SIZE: global_batch_size},
    )
    for _ in range(epochs):
        stats = trainer.train()
    stats.update(trainer.validate())
    model = trainer.get_model()
    print(f"trained weight: {model.weight.item(): .2f}, bias: {model.bias.item(): .2f}")
    trainer.shutdown()
    return stats


def main(core_context, hparams):
    info = headway.get_cluster_info()
    trainer = TorchTrainer(
        training_operator_cls=MyTrainingOperator,
        num_workers=hparams["num_workers"],
        config={
            "lr": hparams["lr"],
            BATCH_SIZE: hparams["global_batch_size"],
            "batch_sleep": hparams["batch_sleep"],
        },
    )
    try:
        # Resume: the same trial continues after its checkpoint's epoch; another trial
        # ("continue trial") starts from the weights at epoch 0.
        trial_id = info.trial.trial_id if info else -1
        epoch, steps = 0, 0
        latest = info.latest_checkpoint if info else None
        if latest is not None:
            with core_context.checkpoint.restore_path(latest) as path:
                trainer.load(path / "trainer.pt")
            metadata = core_context.checkpoint.get_metadata(latest)
            if metadata["trial_id"] == trial_id:
                epoch, steps = metadata["epoch"], metadata["steps_completed"]
        for op in core_context.searcher.operations():
            val_stats = {}
            while epoch < op.length:  # op.length: epochs (searcher.max_length)
                train_stats = trainer.train()
                val_stats = trainer.validate()
                epoch += 1
                steps += int(train_stats["batch_count"])  # batches per worker
                core_context.train.report_training_metrics(
                    steps_completed=steps, metrics=train_stats
                )
                core_context.train.report_validation_metrics(
                    steps_completed=steps, metrics=val_stats
                )
                metadata = {"steps_completed": steps, "epoch": epoch, "trial_id": trial_id}
                with core_context.checkpoint.store_path(metadata) as (path, _):
                    trainer.save(path / "trainer.pt")
                op.report_progress(epoch)
                print(json.dumps({"epoch": epoch, "steps": steps, **val_stats}), flush=True)
                if core_context.preempt.should_preempt():  # paused: the checkpoint is stored
                    return
            op.report_completed(val_stats["val_loss"])
    finally:
        trainer.shutdown()


DEFAULT_HPARAMS = {"lr": 1e-2, "global_batch_size": 64, "num_workers": 2, "batch_sleep": 0.0}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-only", action="store_true", help="run train_example() only")
    args = parser.parse_args()
    if args.seed_only:
        print(json.dumps(train_example()), flush=True)
    else:
        cluster = headway.get_cluster_info()
        hparams = {**DEFAULT_HPARAMS, **(cluster.trial.hparams if cluster else {})}
        # One driver process holds the trial's slots and starts the TorchTrainer workers
        # itself: it is a single-process Core API context (core.init() refuses to guess that).
        with core.init(distributed=core.DistributedContext.single()) as core_context:
            main(core_context, hparams)
