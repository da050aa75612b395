"""A TorchTrainer driver on a Ray cluster (``RAY_ADDRESS``), run by test_torch_trainer_ray_e2e.py.

It holds its own node's CPUs (so that the two workers, 2 CPUs each, land on the two worker
nodes), trains ``ClassifierOperator`` and prints one JSON line per event. With ``--hold-dir``,
rank 0 stops inside epoch ``--hold-epoch`` until the test creates ``go`` in that folder (see
``ClassifierOperator``): the test kills a worker node while the epoch is in flight.
"""

from __future__ import annotations

import argparse
import json
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from headway.torch_trainer import BATCH_SIZE, TorchTrainer, _ray_group
from tests.torch_trainer_operators import ClassifierOperator, SlotHolder, node_ip

START = time.monotonic()


def emit(**event) -> None:
    """One JSON line, with ``t``: seconds since the driver started (for the test's report)."""
    print(json.dumps({**event, "t": round(time.monotonic() - START, 1)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--hold-dir", default="")
    parser.add_argument("--hold-epoch", type=int, default=2)
    parser.add_argument("--node-cpus", type=int, default=2)
    args = parser.parse_args()
    # A lost node's full-size placement group may pend this long before a smaller one is tried
    # (10 s by default): short here, to keep the test short.
    _ray_group.PLACE_TIMEOUT_S = 3.0
    ray.init()  # RAY_ADDRESS
    here = ray.get_runtime_context().get_node_id()
    holder = (
        ray.remote(SlotHolder)
        .options(
            num_cpus=args.node_cpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        )
        .remote()
    )
    ray.get(holder.ping.remote())
    trainer = TorchTrainer(
        training_operator_cls=ClassifierOperator,
        num_workers=2,
        num_cpus_per_worker=args.node_cpus,
        config={
            BATCH_SIZE: 128,
            "lr": 0.2,
            "hold_dir": args.hold_dir,
            "hold_epoch": args.hold_epoch,
        },
    )
    emit(driver=node_ip(), workers=trainer.apply_all_workers(node_ip))
    for _ in range(args.epochs):
        stats = trainer.train()
        emit(
            epoch=stats["epoch"],
            train_loss=stats["train_loss"],
            workers=trainer.num_workers_now,
            failures=trainer.num_failures,
        )
    emit(validation=trainer.validate(), workers=trainer.apply_all_workers(node_ip))
    trainer.shutdown()
    emit(done=True)


if __name__ == "__main__":
    main()
