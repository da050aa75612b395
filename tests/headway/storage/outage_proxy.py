"""A TCP proxy in front of a real server that can go down (connections refused) and come back
on the same port: a storage outage for tests, with the server itself untouched."""

from __future__ import annotations

import contextlib
import socket
import threading


class OutageProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``host, port``) while up.

    ``down()`` closes the listening socket and every open connection, so new connections are
    refused (``ECONNREFUSED``: botocore's ``EndpointConnectionError``), as with a stopped S3
    endpoint; ``up()`` listens again on the same port. Starts up unless ``start_down``.
    """

    def __init__(self, target: tuple[str, int], *, start_down: bool = False) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        if not start_down:
            self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def down(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self.down()
        for thread in self._threads:
            thread.join(5)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # down(): the listener was closed
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._conns += [client, server]
            for src, dst in ((client, server), (server, client)):
                pump = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                pump.start()
                self._threads.append(pump)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
