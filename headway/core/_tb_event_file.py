"""Scalars into a TensorBoard event file, written on the caller's thread into a buffered file.

``SummaryWriter.add_scalar`` costs ~50 us of CPU an event on a machine without TensorFlow:
TensorBoard's stand-in ``gfile`` opens, appends to and closes the file for every record, a
second thread takes each record through a 10-slot queue, and the records' CRC-32C is computed
in pure Python (~8 us a record). The automatic metric writer (``_tensorboard.TensorboardFiles``)
already writes from a thread of its own once a second, so it writes TensorBoard's protos
straight into one open file, framed as TFRecords with ``google-crc32c``'s C CRC: ~5 us a step,
and one event per step carries every metric of that step. The format is TensorBoard's event
file (``EventFileWriter``: a ``brain.Event:2`` version record, then one ``Event`` per step with
a ``Summary`` of ``simple_value`` scalars); the framing is TFRecord's (TensorFlow's
``core/lib/io/record_writer.cc``: length, masked CRC of the length, data, masked CRC of the
data, little-endian).
"""

from __future__ import annotations

import itertools
import os
import pathlib
import socket
import struct
import time
from collections.abc import Iterable

import google_crc32c
from tensorboard.compat.proto.event_pb2 import Event, SourceMetadata
from tensorboard.compat.proto.summary_pb2 import Summary

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
        self._file.flush()

    def close(self) -> None:
        """Flush and close the file."""
        self._file.close()

    def _write(self, event: Event) -> None:
        self._file.write(tf_record(event.SerializeToString()))


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (a 32-bit unsigned int): the CRC rotated right by
    15 bits plus ``0xA282EAD8``, so that a CRC of data holding CRCs stays well distributed."""
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tf_record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord: its length (8 bytes), the length's masked CRC, ``data``,
    the data's masked CRC (4 bytes each), all little-endian."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )
