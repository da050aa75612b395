"""The Core API blog's steps 1-5 (Determined 0.18 "Core API" post), on digits instead of timm.

Written as a Determined user writes it; only the import differs (``determined`` -> ``headway``):

1. distributed: ``torch.distributed.init_process_group(init_method="env://")`` under
   ``python -m headway.launch.torch_distributed``, ``LOCAL_RANK`` from the environment, DDP;
2. metrics: ``DistributedContext.from_torch_distributed()``, reported by rank 0 only;
3. checkpoints: saved by rank 0 with ``store_path``, restored on every rank with
   ``restore_path``; a checkpoint of another trial (continue trial) restarts at epoch 0;
4. hyperparameters from ``info.trial.hparams``; preemption checked after every epoch;
5. searcher: train up to ``op.length`` epochs, rank 0 reports progress and completion.

Each epoch is ``STEPS`` batches; ``steps_completed`` counts global batches. Every rank prints
one JSON line per epoch (``{"rank", "epoch", "steps"}``) so tests can check the ranks agree.
"""

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits

import headway as det

STEPS = 4  # batches per epoch


def parse_args(namespace=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sleep", type=float, default=0.0)
    return parser.parse_args([], namespace=namespace)


def save_checkpoint(core_context, model, optimizer, epoch, trial_id):
    # Step 3: the script's own checkpoint file, copied into a Headway checkpoint.
    with tempfile.TemporaryDirectory() as tmp:
        save_path = os.path.join(tmp, "checkpoint.pth")
        torch.save(
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
            save_path,
        )
        metadata = {"steps_completed": STEPS * (epoch + 1), "trial_id": trial_id, "epoch": epoch}
        with core_context.checkpoint.store_path(metadata) as (path, _):
            shutil.copy2(save_path, path.joinpath("data"))


def main(core_context):
    info = det.get_cluster_info()
    if info is not None:
        latest_checkpoint = info.latest_checkpoint
        trial_id = info.trial.trial_id
        hparams = argparse.Namespace(**info.trial.hparams)
    else:
        latest_checkpoint, trial_id, hparams = None, -1, None
    args = parse_args(hparams)
    # Step 1: ranks from the launcher's environment.
    args.local_rank = int(os.environ.get("LOCAL_RANK", 0))
    args.rank = dist.get_rank() if dist.is_initialized() else 0
    args.world_size = dist.get_world_size() if dist.is_initialized() else 1
    print(
        f"Training in distributed mode. Process {args.rank}, total {args.world_size}.", flush=True
    )

    torch.manual_seed(0)
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target)
    model = torch.nn.Linear(64, 10)
    if torch.cuda.is_available():
        torch.cuda.set_device(args.local_rank)
        model = model.cuda()
        x, y = x.cuda(), y.cuda()
    if args.world_size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    # Step 3: restore.
    start_epoch = 0
    if latest_checkpoint is not None:
        restore_path_context = core_context.checkpoint.restore_path(latest_checkpoint)
    else:
        restore_path_context = contextlib.nullcontext()
    with restore_path_context as restore_path:
        if restore_path is not None:
            state = torch.load(restore_path.joinpath("data"), weights_only=True)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start_epoch = state["epoch"] + 1
            metadata = core_context.checkpoint.get_metadata(latest_checkpoint)
            if metadata["trial_id"] != trial_id:
                start_epoch = 0
    print(json.dumps({"rank": args.rank, "start_epoch": start_epoch}), flush=True)

    # Step 5: the searcher says how long to train.
    next_epoch = start_epoch
    val_loss = None
    for op in core_context.searcher.operations():
        for epoch in range(next_epoch, op.length):
            losses = []
            for step in range(STEPS):
                # Each rank trains on its own shard of the batch.
                gen = torch.Generator().manual_seed(epoch * STEPS + step)
                idx = torch.randperm(len(x), generator=gen)[: args.batch_size]
                idx = idx[args.rank :: args.world_size]
                loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
            train_loss = torch.stack(losses).mean()
            if args.world_size > 1:  # the script aggregates its metrics across ranks itself
                dist.all_reduce(train_loss)
                train_loss /= args.world_size
            with torch.no_grad():
                val_loss = torch.nn.functional.cross_entropy(model(x), y).item()
            steps = STEPS * (epoch + 1)
            print(json.dumps({"rank": args.rank, "epoch": epoch, "steps": steps}), flush=True)
            # Step 2: rank 0 reports.
            if args.rank == 0:
                core_context.train.report_training_metrics(
                    steps_completed=steps, metrics={"loss": train_loss.item()}
                )
                core_context.train.report_validation_metrics(
                    steps_completed=steps, metrics={"val_loss": val_loss}
                )
                save_checkpoint(core_context, model, optimizer, epoch, trial_id)
                op.report_progress(epoch)
            time.sleep(args.sleep)
            # Step 4: stop when asked to (pause, preemption); every rank gets the same answer.
            if core_context.preempt.should_preempt():
                return
        next_epoch = op.length
        if args.rank == 0:
            op.report_completed(val_loss)


if __name__ == "__main__":
    if "WORLD_SIZE" in os.environ:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend, init_method="env://")
    distributed = det.core.DistributedContext.from_torch_distributed()
    try:
        with det.core.init(distributed=distributed) as core_context:
            main(core_context)
    finally:
        if dist.is_initialized():
            # Join gloo's threads before the interpreter exits: left running, they can abort
            # the process at exit ("terminate called without an active exception"), a
            # non-zero exit code that fails a run that had completed (PyTorch's advice).
            dist.destroy_process_group()
