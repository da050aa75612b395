"""``headway.pytorch.DataLoader``: a ``torch.utils.data.DataLoader`` with a reproducible,
resumable order.

The shuffle order of epoch ``e`` is a permutation drawn from a ``torch.Generator`` seeded from
``(trial_seed, e)``, so it is the same in every run of the trial, and a resumed run can start at
``(epoch, batch_in_epoch)`` by skipping indices instead of loading data. The same idea as
Determined's ``determined.pytorch.DataLoader`` (reproducible samplers + ``skip``), built on
``torch.utils.data.BatchSampler`` semantics.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset

logger = logging.getLogger("headway.pytorch")

_MASK63 = (1 << 63) - 1


def epoch_seed(seed: int, epoch: int) -> int:
    """A 63-bit seed for ``epoch`` of a trial with ``seed`` (splitmix-style mixing)."""
    z = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + 1) & ((1 << 64) - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & ((1 << 64) - 1)
    return (z ^ (z >> 31)) & _MASK63


class _ResumableBatchSampler:
    """Yields lists of dataset indices for one epoch, for one slot, from batch ``skip`` on."""

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        shuffle: bool,
        drop_last: bool,
        seed: int,
        rank: int,
        size: int,
        pad: bool,
    ) -> None:
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = seed
        self.rank = rank
        self.size = size
        self.pad = pad
        self.epoch = 0
        self.skip = 0
        if size > 1 and pad:
            # Like DistributedSampler: every slot sees the same number of samples.
            self.per_slot = math.ceil(num_samples / size)
        else:
            self.per_slot = len(range(rank, num_samples, size))

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        self.epoch = epoch
        self.skip = skip

    def __len__(self) -> int:
        if self.drop_last:
            return self.per_slot // self.batch_size
        return math.ceil(self.per_slot / self.batch_size)

    def _indices(self) -> list[int]:
        if self.shuffle:
            gen = torch.Generator()
            gen.manual_seed(epoch_seed(self.seed, self.epoch))
            order = torch.randperm(self.num_samples, generator=gen).tolist()
        else:
            order = list(range(self.num_samples))
        if self.size > 1:
            if self.pad:
                total = self.per_slot * self.size
                order = (order * math.ceil(total / max(len(order), 1)))[:total]
            order = order[self.rank :: self.size]
        return order

    def __iter__(self) -> Iterator[list[int]]:
        order = self._indices()
        bs = self.batch_size
        for b in range(self.skip, len(self)):
            yield order[b * bs : (b + 1) * bs]


class _SkippingBatchSampler:
    """Wraps a user sampler / batch sampler; skips by drawing and dropping batches."""

    def __init__(self, batch_sampler: Any) -> None:
        self.inner = batch_sampler
        self.skip = 0

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)
        elif hasattr(getattr(self.inner, "sampler", None), "set_epoch"):
            self.inner.sampler.set_epoch(epoch)
        self.skip = skip

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.inner), self.skip, None)


class DataLoader:
    """Drop-in for ``torch.utils.data.DataLoader`` that the harness can shuffle reproducibly,
    shard across slots, and resume mid-epoch.

    Takes the same arguments as ``torch.utils.data.DataLoader``; pass the *per-slot* batch size
    (``context.get_per_slot_batch_size()``). With the default sampler (``shuffle`` True or False)
    the order of each epoch depends only on the trial seed and the epoch index, and resuming
    skips indices without loading data. With a custom ``sampler`` / ``batch_sampler``, or an
    ``IterableDataset``, resuming draws and drops the batches before the resume point, and the
    order is only as reproducible as that sampler.

    Iterating this object directly (outside the harness) gives epoch 0 for one slot.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Any = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Any = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
    ) -> None:
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler or drop_last):
            raise ValueError(
                "DataLoader: batch_sampler is mutually exclusive with "
                "batch_size, shuffle, sampler and drop_last"
            )
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler is mutually exclusive with shuffle")
        if batch_size is None and batch_sampler is None:
            raise ValueError("DataLoader: batch_size=None (no batching) is not supported")
        if batch_size is not None and batch_sampler is None and batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be positive, got {batch_size}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.drop_last = drop_last
        self.generator = generator
        self.num_workers = num_workers
        self._loader_kwargs: dict[str, Any] = {
            "num_workers": num_workers,
            "collate_fn": collate_fn,
            "pin_memory": pin_memory,
            "timeout": timeout,
            "worker_init_fn": worker_init_fn,
            "multiprocessing_context": multiprocessing_context,
            "prefetch_factor": prefetch_factor,
            "persistent_workers": persistent_workers,
            "pin_memory_device": pin_memory_device,
        }

    def get_data_loader(
        self, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
    ) -> torch.utils.data.DataLoader[Any]:
        """Build the plain torch DataLoader for epoch 0 of one slot, from batch ``skip`` on.

        ``repeat`` is accepted for Determined compatibility; repeating is the harness's job.
        """
        del repeat
        resumable = ResumableLoader(self, seed=0, rank=rank, size=num_replicas, training=True)
        resumable.set_position(0, skip)
        return resumable.loader

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get_data_loader())

    def __len__(self) -> int:
        return len(self.get_data_loader())


class _LoaderLength:
    """``len()`` and ``has_length()`` of a wrapper holding a torch loader in ``self.loader``."""

    loader: torch.utils.data.DataLoader[Any]

    def __len__(self) -> int:
        return len(self.loader)

    def has_length(self) -> bool:
        """Whether the number of batches per epoch is known (False for most IterableDatasets)."""
        try:
            len(self.loader)
        except TypeError:
            return False
        return True


class ResumableLoader(_LoaderLength):
    """The harness's view of a ``DataLoader``: ``len()`` and ``iter_from(epoch, batch)``.

    ``training`` pads shards so that all slots run the same number of batches per epoch (as
    ``DistributedSampler`` does); validation shards are not padded, so no record counts twice.
    """

    def __init__(
        self, spec: DataLoader, *, seed: int, rank: int, size: int, training: bool
    ) -> None:
        self.spec = spec
        self.seed = seed
        self._generator = torch.Generator()
        kwargs = dict(spec._loader_kwargs)
        if kwargs["num_workers"] == 0:
            # These only mean something with worker processes; torch rejects them otherwise.
            kwargs.pop("prefetch_factor")
            kwargs.pop("persistent_workers")
        self._batch_sampler: Any
        if isinstance(spec.dataset, IterableDataset):
            self._batch_sampler = None
            loader = torch.utils.data.DataLoader(
                spec.dataset,
                batch_size=spec.batch_size,
                drop_last=spec.drop_last,
                generator=self._generator,
                **kwargs,
            )
        else:
            if spec.batch_sampler is not None:
                self._batch_sampler = _SkippingBatchSampler(spec.batch_sampler)
            elif spec.sampler is not None:
                inner = torch.utils.data.BatchSampler(
                    spec.sampler, spec.batch_size or 1, spec.drop_last
                )
                self._batch_sampler = _SkippingBatchSampler(inner)
            else:
                self._batch_sampler = _ResumableBatchSampler(
                    len(spec.dataset),  # type: ignore[arg-type]
                    spec.batch_size or 1,
                    spec.shuffle,
                    spec.drop_last,
                    seed,
                    rank,
                    size,
                    pad=training,
                )
            loader = torch.utils.data.DataLoader(
                spec.dataset, batch_sampler=self._batch_sampler, generator=self._generator, **kwargs
            )
        self.loader = loader
        self._epoch = 0
        self._skip = 0

    def set_position(self, epoch: int, skip: int) -> None:
        """Make the next ``iter()`` yield epoch ``epoch`` starting at its batch ``skip``."""
        self._epoch = epoch
        self._skip = skip
        # Worker seeds (and torch's base seed) come from this generator, not from the global RNG,
        # so creating an iterator never disturbs the training RNG stream.
        self._generator.manual_seed(epoch_seed(self.seed ^ 0x5EED, epoch))
        if self._batch_sampler is not None:
            self._batch_sampler.set_epoch(epoch, skip)

    def __iter__(self) -> Iterator[Any]:
        it: Iterator[Any] = iter(self.loader)
        if self._batch_sampler is None and self._skip:
            it = itertools.islice(it, self._skip, None)
        return it


class _PlainLoader(_LoaderLength):
    """A plain ``torch.utils.data.DataLoader`` returned by a trial: resumed by dropping batches."""

    def __init__(self, loader: torch.utils.data.DataLoader[Any]) -> None:
        self.loader = loader
        self._skip = 0

    def set_position(self, epoch: int, skip: int) -> None:
        """Start the next ``iter()`` at batch ``skip`` (the epoch only matters to samplers)."""
        sampler = getattr(self.loader, "sampler", None)
        if sampler is not None and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        self._skip = skip

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(iter(self.loader), self._skip, None)
