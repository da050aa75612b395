"""The worker process of a ``TorchTrainer``: builds the operator once, then runs commands.

``worker_main`` is the function ``torch.distributed.elastic`` starts once per worker (see
``_group.py``). It reads its rank from the variables the elastic agent sets (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``), joins a process group whose keys live in the driver's store,
builds the ``TrainingOperator``, loads the driver's last good state, answers "ready", and then
executes the driver's commands in order until ``shutdown``. A command that raises is answered
with the traceback (and whether it is a lost peer's consequence) and the process exits
non-zero, so the agent stops the whole group: a rank left inside a collective would otherwise
wait for the failed one until ``timeout_s``.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from headway.torch_trainer import _transport as transport
from headway.torch_trainer._data import iterate
from headway.torch_trainer._operator import TrainingOperator
from headway.torch_trainer.utils import NUM_STEPS, USE_FP16

_CONNECT_TIMEOUT = datetime.timedelta(seconds=300)
# What gloo and NCCL raise in the surviving ranks when a peer process is gone (its sockets
# closed, its communicator aborted). Such an error is a consequence of another worker's death,
# which the driver may retry; any other exception is a bug the driver raises (not retried).
_PEER_LOST = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "Connection refused",
    "NCCL communicator was aborted",
    "NCCL Error",
)


def _peer_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it chains) says a peer worker went away."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, dist.DistError) or any(text in str(seen) for text in _PEER_LOST):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """What every worker of one launch needs; pickled to the workers by the spawn start method.

    Attributes:
        store_host / store_port: the driver's TCPStore.
        secret: the HMAC key of the command payloads (``_transport.py``).
        generation: this launch's number (key namespace in the store).
        operator_cls: the user's ``TrainingOperator`` subclass (pickled by reference).
        config: the per-worker config (``BATCH_SIZE`` already divided).
        state_path: a state file (``TrainingOperator._full_state``) to load after set-up, or None.
        threads: ``torch.set_num_threads`` for each worker (``HEADWAY_THREADS_PER_SLOT``), or None.
        initialization_hook: called first in each worker, or None.
        backend, use_gpu, use_fp16, use_tqdm, wrap_ddp, add_dist_sampler, scheduler_step_freq,
        timeout_s: as given to ``TorchTrainer``.
        ship_state: state files travel through the store (``_transport.state_key``), not the
            disk: the workers may run on other hosts (Ray).
    """

    store_host: str
    store_port: int
    secret: bytes
    generation: int
    operator_cls: type[TrainingOperator]
    config: dict[str, Any]
    state_path: str | None
    threads: int | None
    initialization_hook: Callable[[], Any] | None
    backend: str
    use_gpu: bool
    use_fp16: bool
    use_tqdm: bool
    wrap_ddp: bool
    add_dist_sampler: bool
    scheduler_step_freq: str | None
    timeout_s: float
    ship_state: bool = False


class _Runner:
    """One worker's operator plus its epoch counter and the command implementations."""

    def __init__(
        self, spec: WorkerSpec, rank: int, local_rank: int, world_size: int, store: dist.Store
    ) -> None:
        self.spec = spec
        self.store = store
        if spec.use_gpu:
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
        else:
            device = torch.device("cpu")
        self.epochs = 0
        self.rank = rank
        self.operator = spec.operator_cls(
            spec.config,
            world_rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            is_distributed=world_size > 1,
            device=device,
            use_gpu=spec.use_gpu,
            use_fp16=spec.use_fp16,
            use_tqdm=spec.use_tqdm,
            wrap_ddp=spec.wrap_ddp,
            add_dist_sampler=spec.add_dist_sampler,
            scheduler_step_freq=spec.scheduler_step_freq,
        )
        self.use_fp16 = spec.use_fp16

    def _profiling(self, profile: bool) -> None:
        timers = self.operator.timers
        timers.reset()
        if profile:
            timers.enable()
        else:
            timers.disable()

    def train(
        self, num_steps: int | None, profile: bool, info: dict[str, Any] | None, save_to: str
    ) -> dict[str, Any]:
        loader = self.operator.train_loader
        if loader is None:
            raise RuntimeError("no train_loader: call self.register_data(train_loader=...)")
        self._profiling(profile)
        sampler: Any = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.epochs)  # a new shuffle each epoch, the same on every rank
        epoch_info = {**(info or {}), NUM_STEPS: num_steps, USE_FP16: self.use_fp16}
        epoch_info["epoch_idx"] = self.epochs
        with self.operator.timers.record("train_epoch"):
            stats = self.operator.train_epoch(iterate(loader, num_steps), epoch_info)
        self.epochs += 1
        out = {"epoch": self.epochs, **stats}
        if profile:
            out["profile"] = self.operator.timers.stats()
        self.save(save_to)  # the driver's last good state once every rank answered
        return out

    def validate(
        self, num_steps: int | None, profile: bool, info: dict[str, Any] | None
    ) -> dict[str, Any]:
        loader = self.operator.validation_loader
        if loader is None:
            raise RuntimeError(
                "no validation_loader: call self.register_data(validation_loader=...)"
            )
        self._profiling(profile)
        with self.operator.timers.record("validation"):
            stats = self.operator.validate(iterate(loader, num_steps), dict(info or {}))
        if profile:
            stats = {**stats, "profile": self.operator.timers.stats()}
        return stats

    def save(self, path: str) -> None:
        # Every rank holds the same state (DDP); rank 0 writes it, atomically for the driver.
        if self.rank != 0:
            return
        if self.spec.ship_state:
            buffer = io.BytesIO()
            torch.save(self.operator._full_state(self.epochs), buffer)
            key = transport.state_key(path)
            transport.put(self.store, self.spec.secret, key, buffer.getvalue())
            return
        tmp = f"{path}.tmp"
        torch.save(self.operator._full_state(self.epochs), tmp)
        os.replace(tmp, path)

    def load(self, path: str) -> None:
        source: Any = path
        if self.spec.ship_state:
            source = io.BytesIO(
                transport.get(self.store, self.spec.secret, transport.state_key(path))
            )
        state = torch.load(source, map_location=self.operator.device, weights_only=False)
        self.epochs = self.operator._load_full_state(state)

    def run(self, op: str, kwargs: dict[str, Any]) -> Any:
        if op == "train":
            return self.train(**kwargs)
        if op == "validate":
            return self.validate(**kwargs)
        if op == "save":
            return self.save(**kwargs)
        if op == "load":
            return self.load(**kwargs)
        if op == "update_scheduler":
            for scheduler in self.operator.schedulers:
                scheduler.step(kwargs["metric"])
            return None
        if op == "apply":
            return kwargs["fn"]()
        if op == "apply_operator":
            return kwargs["fn"](self.operator)
        if op == "shutdown":
            return None
        raise ValueError(f"unknown command {op!r}")


def _whole_lines() -> None:
    # The agent tees each worker's output file with a prefix per line, but it prefixes whatever
    # it reads at the file's end: text and newline written in two calls (print, when unbuffered)
    # could come out as two prefixed halves. Line buffering writes each line of up to 8 KiB at once.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(line_buffering=True, write_through=False)


def worker_main(spec: WorkerSpec) -> None:
    """Entry point of one worker process (started by ``elastic_launch``)."""
    _whole_lines()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(
        spec.store_host, spec.store_port, is_master=False, timeout=_CONNECT_TIMEOUT
    )

    def answer(seq: int, value: Any) -> None:
        transport.put(store, spec.secret, transport.result_key(spec.generation, seq, rank), value)

    try:
        if spec.threads:
            torch.set_num_threads(spec.threads)
        if spec.initialization_hook is not None:
            spec.initialization_hook()
        if world_size > 1:
            dist.init_process_group(
                spec.backend,
                store=dist.PrefixStore(transport.pg_prefix(spec.generation), store),
                rank=rank,
                world_size=world_size,
                timeout=datetime.timedelta(seconds=spec.timeout_s),
            )
        runner = _Runner(spec, rank, local_rank, world_size, store)
        if spec.state_path is not None:
            runner.load(spec.state_path)
    except BaseException as exc:
        answer(0, ("error", (traceback.format_exc(), _peer_lost(exc))))
        raise
    answer(0, ("ok", os.getpid()))
    seq = 1
    while True:
        key = transport.command_key(spec.generation, seq)
        transport.wait(store, [key])
        op, kwargs = transport.get(store, spec.secret, key)
        try:
            result = runner.run(op, kwargs)
        except BaseException as exc:
            answer(seq, ("error", (traceback.format_exc(), _peer_lost(exc))))
            raise
        answer(seq, ("ok", result))
        seq += 1
        if op == "shutdown":
            break
    if dist.is_initialized():
        dist.destroy_process_group()
