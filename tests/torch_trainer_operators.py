"""TrainingOperators for tests/headway/torch_trainer/ and e2e_tests/headway/torch_trainer/ (module level: workers import them)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from headway.torch_trainer import BATCH_SIZE, TrainingOperator

ROWS = 96  # training rows; validation uses the first 40


def linear_data(rows: int = ROWS) -> TensorDataset:
    """y = 2x + 5 on [0, 1)."""
    x = torch.arange(rows, dtype=torch.float32).unsqueeze(1) / rows
    return TensorDataset(x, 2 * x + 5)


class LinearOperator(TrainingOperator):
    """The seed's linear model; with ``config["crash_marker"]`` set, worker 1 SIGKILLs itself
    at batch 2 of epoch ``config["crash_epoch"]`` (once: it creates the marker first; every
    time with ``config["crash_always"]``)."""

    def setup(self, config):
        torch.manual_seed(0)
        model = nn.Linear(1, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.1), momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        self.model, self.optimizer, self.criterion, self.scheduler = self.register(
            models=model, optimizers=optimizer, criterion=nn.MSELoss(), schedulers=scheduler
        )
        batch = config[BATCH_SIZE]
        self.register_data(
            train_loader=DataLoader(linear_data(), batch_size=batch, shuffle=True),
            validation_loader=DataLoader(linear_data(40), batch_size=batch),
        )
        self.extra = {"setups": 1}

    def train_batch(self, batch, batch_info):
        marker = self.config.get("crash_marker")
        if (
            marker
            and self.world_rank == 1
            and batch_info["epoch_idx"] == self.config["crash_epoch"]
            and batch_info["batch_idx"] == 2
            and (self.config.get("crash_always") or not Path(marker).exists())
        ):
            Path(marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().train_batch(batch, batch_info)

    def state_dict(self):
        return self.extra

    def load_state_dict(self, state_dict):
        self.extra = dict(state_dict, loaded=True)


def per_worker_batch_size(operator: TrainingOperator) -> int:
    return operator.config[BATCH_SIZE]


def operator_extra(operator: TrainingOperator) -> dict:
    return dict(operator.state_dict())


def learning_rate(operator: TrainingOperator) -> float:
    return operator.optimizer.param_groups[0]["lr"]


def raise_value_error() -> None:
    raise ValueError("raised by a worker on purpose")


def worker_env() -> tuple[str, str, str]:
    return os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ.get("TT_HOOK", "")


def mark_hook() -> None:
    """An initialization_hook: sets a variable the worker_env() check reads."""
    os.environ["TT_HOOK"] = "ran"


def device_type(operator: TrainingOperator) -> str:
    return operator.device.type


def print_in_two_writes() -> None:
    """Prints a JSON line as ``print`` does unbuffered: the text, a pause, then the newline."""
    print(json.dumps({"rank": int(os.environ["RANK"])}), end="")
    time.sleep(0.3)  # the agent's tee polls each worker's output file every 0.1 s
    print()


def node_ip() -> str:
    """The Ray node address a worker runs on (Ray tests)."""
    import ray

    return str(ray.util.get_node_ip_address())


# RaySGD's creator functions for TrainingOperator.from_creators (module level: they are pickled).
def model_creator(config):
    torch.manual_seed(0)
    return nn.Linear(1, 1)


def optimizer_creator(model, config):
    return torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.1), momentum=0.9)


def data_creator(config):
    batch = config[BATCH_SIZE]
    return (
        DataLoader(linear_data(), batch_size=batch, shuffle=True),
        DataLoader(linear_data(40), batch_size=batch),
    )


def scheduler_creator(optimizer, config):
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)


class SlotHolder:
    """A Ray actor class that only holds the resources it was given (Ray tests)."""

    def ping(self) -> bool:
        return True


def classification_data(rows: int, seed: int) -> TensorDataset:
    """Generated two-class data: 8 Gaussian features, label = which side of a fixed plane."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 8, generator=generator)
    plane = torch.linspace(-1.0, 1.0, 8)
    return TensorDataset(x, (x @ plane > 0).long())


class ClassifierOperator(TrainingOperator):
    """A small MLP on ``classification_data`` (cross-entropy; Ray end-to-end tests).

    With ``config["hold_dir"]``, rank 0 stops before batch 2 of epoch ``config["hold_epoch"]``
    (once): it creates ``held`` in that folder and waits until ``go`` exists there, so a test can
    act while the epoch is in flight (the other ranks wait in their next collective).
    """

    def train_batch(self, batch, batch_info):
        hold_dir = self.config.get("hold_dir")
        if (
            hold_dir
            and self.world_rank == 0
            and batch_info["epoch_idx"] == self.config["hold_epoch"]
            and batch_info["batch_idx"] == 2
            and not (Path(hold_dir) / "held").exists()
        ):
            (Path(hold_dir) / "held").touch()
            while not (Path(hold_dir) / "go").exists():
                time.sleep(0.05)
        return super().train_batch(batch, batch_info)

    def setup(self, config):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=config.get("lr", 0.1))
        self.model, self.optimizer, self.criterion = self.register(
            models=model, optimizers=optimizer, criterion=nn.CrossEntropyLoss()
        )
        batch = config[BATCH_SIZE]
        self.register_data(
            train_loader=DataLoader(classification_data(2048, 1), batch_size=batch, shuffle=True),
            validation_loader=DataLoader(classification_data(512, 2), batch_size=batch),
        )
