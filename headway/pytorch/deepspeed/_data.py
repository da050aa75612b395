"""Data iterators a ``DeepSpeedTrial`` receives, and their view from the harness loop.

``MicroBatchStream`` is the iterator handed to ``train_batch`` / ``evaluate_batch``: it yields
micro-batches from a ``ResumableLoader`` (or a plain loader), runs on into the next epoch for
training (Determined's ``repeat=True`` loader), remembers where it is so a checkpoint can resume
it exactly, and counts the records it yielded (the weight of validation metrics).

``BatchSlots`` is what the shared ``_Loop`` iterates over as its "loader": once per harness
batch it yields the stream itself (or None on ranks without data), so the loop's epoch,
reporting, validation and checkpoint logic run unchanged while the trial pulls the data.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any


class MicroBatchStream:
    """An iterator over a loader's batches that knows its position ``(epoch, index)``.

    Arguments:
        loader: a ``ResumableLoader`` / ``_PlainLoader`` (``set_position(epoch, skip)`` and
            ``iter()``).
        repeat (bool): at the end of an epoch, go on with the next one (training) instead of
            stopping (validation).
        batch_length (callable | None): counts a batch's records into ``records``.
    """

    def __init__(
        self, loader: Any, *, repeat: bool, batch_length: Callable[[Any], int] | None = None
    ) -> None:
        self.loader = loader
        self.repeat = repeat
        self.batch_length = batch_length
        self.epoch = 0
        self.index = 0
        self.records = 0
        self._it: Iterator[Any] | None = None

    def seek(self, epoch: int, index: int) -> None:
        """Make the next ``next()`` yield batch ``index`` of epoch ``epoch``."""
        self.epoch, self.index, self._it = int(epoch), int(index), None

    def position(self) -> dict[str, int]:
        """``{"epoch": e, "index": i}``: the next batch ``next()`` yields."""
        return {"epoch": self.epoch, "index": self.index}

    def __iter__(self) -> MicroBatchStream:
        return self

    def __len__(self) -> int:
        """Batches per epoch of the underlying loader."""
        return len(self.loader)

    def __next__(self) -> Any:
        while True:
            if self._it is None:
                self.loader.set_position(self.epoch, self.index)
                self._it = iter(self.loader)
            try:
                batch = next(self._it)
            except StopIteration:
                if not self.repeat:
                    raise
                if self.index == 0:
                    raise RuntimeError("the training data loader yielded no batches") from None
                self.seek(self.epoch + 1, 0)
                continue
            self.index += 1
            if self.batch_length is not None:
                self.records += self.batch_length(batch)
            return batch


class BatchSlots:
    """The loop's loader: ``length`` slots per epoch, each holding ``stream`` (None: no data).

    ``rewind``: each ``set_position`` restarts the stream at its beginning (validation); else
    the stream keeps its own position across the loop's epochs (training).
    """

    def __init__(self, stream: MicroBatchStream | None, length: int, *, rewind: bool) -> None:
        self.stream = stream
        self.length = length
        self.rewind = rewind
        self._skip = 0

    def __len__(self) -> int:
        return self.length

    def has_length(self) -> bool:
        """Always True: the harness knows the batches per epoch."""
        return True

    def set_position(self, epoch: int, skip: int) -> None:
        """The next ``iter()`` yields the slots from ``skip`` to the end of the epoch."""
        self._skip = skip
        if self.rewind and self.stream is not None:
            self.stream.seek(0, 0)

    def __iter__(self) -> Iterator[MicroBatchStream | None]:
        return itertools.repeat(self.stream, max(self.length - self._skip, 0))
