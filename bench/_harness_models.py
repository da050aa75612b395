"""The data, models and raw PyTorch loop that bench/harness_overhead.py measures every loop against.

Shared by the harness rows (``harness_overhead.py``) and the Lightning peer row
(``_lightning_peer.py``), so all three train the same models on the same batches.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch
from sklearn.datasets import load_digits
from torch import nn

BATCH = 32


def dataset() -> torch.utils.data.TensorDataset:
    """scikit-learn's digits: 1,437 training images as 64 float features in [0, 1], labels 0-9.

    Kept on the CPU whatever ``--device``: every loop moves each batch to the device itself.
    """
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    return torch.utils.data.TensorDataset(x[:1437], y[:1437])


def model(kind: str) -> nn.Module:
    """``tiny``: MLP 64-128-10; ``large``: MLP 64-2048-2048-2048-10 (compute-bound)."""
    if kind == "tiny":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    width = 2048
    return nn.Sequential(
        nn.Linear(64, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )


def optimizer(net: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum, the same for every loop."""
    return torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)


def pick_device(name: str) -> torch.device:
    """``cpu`` or ``cuda`` (``cuda:0``).

    Raises:
        SystemExit: ``cuda`` without a CUDA device torch can use, or another name.
    """
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: torch sees no CUDA device (torch.cuda.is_available())")
        return torch.device("cuda", 0)
    raise SystemExit(f"--device must be cpu or cuda, got {name!r}")


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that a clock read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_raw(
    kind: str,
    batches: int,
    data: torch.utils.data.TensorDataset,
    device: torch.device,
) -> dict[str, float]:
    """A plain PyTorch loop over ``batches`` batches: ``samples_per_s`` (wall) and
    ``cpu_us_per_batch`` (this process's CPU time). On a GPU each batch is copied to it as the
    harness copies it (``non_blocking=True``) and the clocks are read after a synchronize."""
    torch.manual_seed(0)
    net = model(kind).to(device)
    opt = optimizer(net)
    loss_fn = nn.CrossEntropyLoss()
    on_cpu = device.type == "cpu"
    sync(device)
    start, cpu = time.perf_counter(), time.process_time()
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
    done = 0
    while done < batches:
        for x, y in loader:
            if not on_cpu:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done += 1
            if done == batches:
                break
    sync(device)
    return {
        "samples_per_s": batches * BATCH / (time.perf_counter() - start),
        "cpu_us_per_batch": (time.process_time() - cpu) * 1e6 / batches,
    }


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch intra-op threads, then restore the number before."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
