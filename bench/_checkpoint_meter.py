"""Checkpoint I/O bench, instruments: wall and CPU time of a step, the server's RSS growth."""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time

import psutil


class Meter:
    """Wall and CPU seconds of one timed step (CPU: this process, reaped children, the server).

    ``start()`` syncs dirty pages first, so earlier writes do not bill the step."""

    def __init__(self, server: psutil.Process) -> None:
        self.server = server
        self.wall = self.cpu = 0.0

    def _cpu(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        for proc in [self.server, *self.server.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = proc.cpu_times()
                total += times.user + times.system
        return total

    def start(self) -> None:
        os.sync()
        self._cpu0, self._wall0 = self._cpu(), time.perf_counter()

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self._wall0
        self.cpu = self._cpu() - self._cpu0
        return self


class RSSWatch:
    """The largest RSS growth of any of the server's processes while the block runs (sampled
    every 10 ms from ``/proc``, the resting size taken at entry), in bytes."""

    def __init__(self, server: psutil.Process) -> None:
        self.procs = [server, *server.children(recursive=True)]
        self.growth = 0
        self._stop = threading.Event()

    def _rss(self) -> list[int]:
        return [proc.memory_info().rss for proc in self.procs]

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            now = self._rss()
            self.growth = max(self.growth, *(n - r for n, r in zip(now, self.rest, strict=True)))

    def __enter__(self) -> RSSWatch:
        self.rest = self._rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
