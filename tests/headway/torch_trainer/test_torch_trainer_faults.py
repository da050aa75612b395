"""TorchTrainer fault tolerance: a worker killed mid-epoch (SIGKILL) is replaced by a new group
that loads the last good state and runs the epoch again; past ``max_retries`` train() raises.

The kill is deterministic: worker 1 sends itself SIGKILL at batch 2 of epoch 1
(tests/torch_trainer_operators.py), the way an OOM kill or a lost process looks to the trainer.
"""

from __future__ import annotations

import pytest
import torch

from headway.torch_trainer import BATCH_SIZE, NUM_SAMPLES, TorchTrainer
from tests.torch_trainer_operators import ROWS, LinearOperator

pytestmark = pytest.mark.slow

EPOCHS = 3


def run(config: dict, max_retries: int) -> tuple[list[dict], dict, int]:
    """Train ``EPOCHS`` epochs on 2 workers: (per-epoch stats, final state, group failures)."""
    trainer = TorchTrainer(
        training_operator_cls=LinearOperator,
        num_workers=2,
        config={BATCH_SIZE: 16, **config},
        scheduler_step_freq="epoch",
    )
    try:
        stats = [trainer.train(max_retries=max_retries) for _ in range(EPOCHS)]
        return stats, trainer.state_dict(), trainer.num_failures
    finally:
        trainer.shutdown()


def test_a_killed_worker_is_replaced_and_training_continues_from_the_last_state(tmp_path):
    crash = {"crash_marker": str(tmp_path / "killed"), "crash_epoch": 1}
    stats, state, failures = run(crash, max_retries=3)
    assert (tmp_path / "killed").exists()  # worker 1 really died mid-epoch
    assert failures == 1
    assert [s["epoch"] for s in stats] == [1, 2, 3]
    assert all(s[NUM_SAMPLES] == ROWS for s in stats)  # epoch 1 ran once, complete
    # The same weights, optimizer and scheduler state as a run nobody killed: the new group
    # loaded the state after epoch 0 and redid epoch 1 with the same data order.
    reference_stats, reference, _ = run({}, max_retries=0)
    assert [s["train_loss"] for s in stats] == [s["train_loss"] for s in reference_stats]
    for key in ("weight", "bias"):
        assert torch.equal(state["models"][0][key], reference["models"][0][key])
    assert state["schedulers"] == reference["schedulers"]
    assert state["epoch"] == reference["epoch"] == EPOCHS


def test_a_worker_that_keeps_dying_makes_train_raise_after_max_retries(tmp_path):
    crash = {"crash_marker": str(tmp_path / "killed"), "crash_epoch": 1, "crash_always": True}
    with pytest.raises(RuntimeError, match="max_retries=1 restarts are used up"):
        run(crash, max_retries=1)
