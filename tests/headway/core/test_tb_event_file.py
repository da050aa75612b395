"""The automatic metric writer's TensorBoard records (``headway.core._tb_event_file``) are
byte for byte what TensorBoard's own ``RecordWriter`` writes, and TensorBoard reads them."""

from __future__ import annotations

import io
import pathlib

import pytest
from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_crc
from tensorboard.summary.writer.record_writer import RecordWriter

from headway.core._tb_event_file import ScalarEventFile, masked_crc32c, tf_record


@pytest.mark.parametrize("data", [b"", b"x", bytes(range(256)) * 3, b"\x00" * 8])
def test_a_record_is_framed_as_tensorboard_frames_it(data: bytes) -> None:
    assert masked_crc32c(data) == tb_crc(data)
    theirs = io.BytesIO()
    RecordWriter(theirs).write(data)
    assert tf_record(data) == theirs.getvalue()


def test_tensorboard_reads_every_step_and_value(tmp_path: pathlib.Path) -> None:
    writer = ScalarEventFile(tmp_path / "tb")
    writer.add_scalars(3, [("a", 1.5), ("b", -2.0)])
    writer.add_scalars(4, [])  # nothing to write: no event
    writer.add_scalars(5, [("a", 0.25)])
    writer.close()
    # TensorBoard's reader checks each record's length and CRCs as it reads.
    events = [Event.FromString(r) for r in RawEventFileLoader(str(writer.path)).Load()]
    assert events[0].file_version == "brain.Event:2"
    scalars = [(e.step, v.tag, v.simple_value) for e in events[1:] for v in e.summary.value]
    assert scalars == [(3, "a", 1.5), (3, "b", -2.0), (5, "a", 0.25)]
