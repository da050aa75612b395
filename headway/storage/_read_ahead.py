"""Build an archive's next pieces in a second thread while the first one sends the last ones."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

# Pieces built ahead of the one being sent: a few MiB of memory for a whole send's overlap.
DEPTH = 4
_DONE = object()


class ReadAhead:
    """Iterate ``source`` in a daemon thread, at most ``depth`` pieces ahead of the consumer.

    Why: a zip needs the CRC-32 of every byte and a tgz deflates every byte, work that ran in
    the thread that sends, so sending and that work took turns. ``zlib.crc32``, ``compress``,
    file reads and socket sends all release the GIL on large buffers, so with the archive built
    here the two overlap (docs/performance.md, "Checkpoint I/O").

    ``len()`` is ``length`` (the archive's size when known in advance; ``TypeError`` without
    one). An exception raised by ``source`` is raised again in the consumer, at the piece where
    it happened. ``close()`` (Django calls it when a response ends, also when the client went
    away) stops the thread after its current piece and closes ``source`` there.
    """

    def __init__(self, source: Iterable[bytes], length: int | None = None, depth: int = DEPTH):
        self._source = source
        self._length = length
        self._pieces: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("ReadAhead has no length: none was given")
        return self._length

    def __iter__(self) -> Iterator[bytes]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._produce, name="read-ahead", daemon=True)
            self._thread.start()
        while True:
            piece = self._pieces.get()
            if piece is _DONE:
                return
            if isinstance(piece, BaseException):
                raise piece
            yield piece  # type: ignore[misc]

    def _produce(self) -> None:
        iterator = iter(self._source)
        try:
            for piece in iterator:
                if not self._put(piece):
                    return
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _put(self, item: object) -> bool:
        """Queue ``item``, waiting for room; False once the consumer has closed."""
        while not self._stop.is_set():
            try:
                self._pieces.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def close(self) -> None:
        """Stop building (the thread ends after its current piece) and free what was queued."""
        self._stop.set()
        while True:
            try:
                self._pieces.get_nowait()
            except queue.Empty:
                break
        if self._thread is not None:
            self._thread.join(timeout=5)
