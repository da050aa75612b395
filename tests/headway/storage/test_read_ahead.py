"""ReadAhead: an archive built in a second thread arrives whole, in order, and stops when closed."""

from __future__ import annotations

import threading

import pytest

from headway.storage import ReadAhead


def test_pieces_arrive_in_order_with_the_given_length():
    pieces = [bytes([i]) * (i + 1) for i in range(50)]
    body = ReadAhead(iter(pieces), length=sum(map(len, pieces)), depth=3)
    assert len(body) == sum(map(len, pieces))
    assert list(body) == pieces


def test_no_length_given_is_a_type_error():
    with pytest.raises(TypeError, match="no length"):
        len(ReadAhead(iter([b"x"])))


def test_an_error_of_the_source_is_raised_in_the_consumer_after_the_pieces_before_it():
    def source():
        yield b"first"
        raise FileNotFoundError("gone.bin")

    seen = []
    with pytest.raises(FileNotFoundError, match=r"gone\.bin"):
        for piece in ReadAhead(source()):
            seen.append(piece)
    assert seen == [b"first"]


def test_close_stops_the_thread_and_closes_the_source():
    closed = threading.Event()

    def endless():
        try:
            while True:
                yield b"x" * 1024
        finally:
            closed.set()

    body = ReadAhead(endless(), depth=2)
    first = next(iter(body))
    body.close()
    assert first == b"x" * 1024
    assert closed.is_set()
    assert body._thread is not None and not body._thread.is_alive()
