"""Data helpers of the default loops: per-worker shards and ``num_steps`` iteration."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import DataLoader, DistributedSampler, IterableDataset

logger = logging.getLogger("headway.torch_trainer")


def with_distributed_sampler(loader: Any, shuffle: bool) -> Any:
    """``loader`` rebuilt over a ``DistributedSampler`` (each worker its own shard), or itself
    when it is not a map-style ``DataLoader`` with a plain ``batch_size``."""
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return loader
    if loader.batch_size is None:  # a custom batch_sampler: the user shards it
        logger.warning("a DataLoader with a batch_sampler is not given a DistributedSampler")
        return loader
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        shuffle=False,
        sampler=DistributedSampler(loader.dataset, shuffle=shuffle),
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
    )


def iterate(loader: Iterable[Any], num_steps: int | None) -> Iterator[Any]:
    """The batches of one ``train()`` / ``validate()`` call: all of ``loader``, or exactly
    ``num_steps`` batches, starting ``loader`` over as often as needed (RaySGD's ``num_steps``)."""
    if num_steps is None:
        yield from loader
        return
    done = 0
    while done < num_steps:
        produced = False
        for batch in loader:
            produced = True
            yield batch
            done += 1
            if done == num_steps:
                return
        if not produced:
            return
