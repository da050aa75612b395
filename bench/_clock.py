"""``TrainingClock``: a callback that times a harness ``fit()``'s training from inside a rank.

Imported by the rank processes of bench/ddp_overhead.py and bench/_ddp_deepspeed.py (bench/ is
``sys.path[0]`` there).
"""

from __future__ import annotations

import time

import torch

from headway import pytorch


class TrainingClock(pytorch.PyTorchCallback):
    """Marks when training starts (the first epoch) and ends (the final validation starts).

    Attributes:
        training_started (float): ``time.perf_counter()`` at the first ``on_training_epoch_start``.
        training_done (float): ``time.perf_counter()`` at ``on_validation_start``, after a CUDA
            synchronize when ``device`` is a CUDA device.
    """

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = device
        self.training_started = 0.0
        self.training_done = 0.0

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        if not self.training_started:
            self.training_started = time.perf_counter()

    def on_validation_start(self) -> None:
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.training_done = time.perf_counter()
