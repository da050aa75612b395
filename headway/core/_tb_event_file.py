"""Scalars into a TensorBoard event file, written on the caller's thread into a buffered file.

``SummaryWriter.add_scalar`` costs ~50 us of CPU an event on a machine without TensorFlow:
TensorBoard's stand-in ``gfile`` opens, appends to and closes the file for every record, and a
second thread takes each record through a 10-slot queue. The automatic metric writer
(``_tensorboard.TensorboardFiles``) already writes from a thread of its own once a second, so it
writes the same records (TensorBoard's protos, framed by its ``RecordWriter``) straight into one
open file: ~12 us an event, and one event per step carries every metric of that step. The
format is TensorBoard's event file (``EventFileWriter``: a ``brain.Event:2`` version record,
then one ``Event`` per step with a ``Summary`` of ``simple_value`` scalars).
"""

from __future__ import annotations

import itertools
import os
import pathlib
import socket
import time
from collections.abc import Iterable

from tensorboard.compat.proto.event_pb2 import Event, SourceMetadata
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

# A file of this process's own numbering: never the name of a user's SummaryWriter file
# (TensorBoard numbers those with its own counter) in the same folder and second.
_SUFFIX = ".headway"
_numbers = itertools.count()


class ScalarEventFile:
    """A new event file in ``logdir`` (created if missing) that scalars are appended to.

    Not thread-safe: one thread writes (the metric writer's). Records reach the file on
    ``flush()`` and ``close()`` (and when the buffer fills).

    Raises:
        OSError: when the folder or the file cannot be created.
    """

    def __init__(self, logdir: pathlib.Path) -> None:
        logdir.mkdir(parents=True, exist_ok=True)
        name = (
            f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_numbers)}{_SUFFIX}"
        )
        self.path = logdir / name
        self._file = open(self.path, "wb")  # noqa: SIM115 (closed by close())
        self._records = RecordWriter(self._file)
        self._write(
            Event(
                wall_time=time.time(),
                file_version="brain.Event:2",
                source_metadata=SourceMetadata(writer="headway.core"),
            )
        )

    def add_scalars(self, step: int, scalars: Iterable[tuple[str, float]]) -> None:
        """One event at ``step`` (batches) holding every ``(tag, value)`` of ``scalars``."""
        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars]
        if values:
            self._write(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))

    def flush(self) -> None:
        """Hand what is buffered to the operating system (readers see it from then on)."""
        self._records.flush()

    def close(self) -> None:
        """Flush and close the file."""
        self._records.close()

    def _write(self, event: Event) -> None:
        self._records.write(event.SerializeToString())
