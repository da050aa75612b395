"""``manage.py runserver`` with Nagle's algorithm off, and no database connection left behind
by the thread that served a client connection.

Django's dev server (wsgiref) sends the status line + headers and the body in separate
``send()`` calls. With Nagle on, the body waits for the client's delayed ACK, so every request
on a keep-alive connection (the SDK's ``requests.Session``) costs ~40 ms on Linux instead of
<1 ms (bench/metrics_ingest.py). ``socketserver.StreamRequestHandler.disable_nagle_algorithm``
sets TCP_NODELAY on each accepted socket.

The server runs one thread per client connection, and database connections are per thread: with
``CONN_MAX_AGE`` a thread that ends would leave its connection open until the database drops it,
so hundreds of short-lived trial processes exhausted PostgreSQL's ``max_connections``
(bench/scheduling.py). Each thread closes its connections when its client connection ends; the
keep-alive requests of one client still share one database connection.

Overrides ``django.contrib.staticfiles``' runserver (``registry`` is listed before it in
INSTALLED_APPS); static files are served by WhiteNoise's middleware, not by this command.
"""

from django.core.management.commands.runserver import Command as RunserverCommand
from django.core.servers import basehttp
from django.core.servers.basehttp import WSGIRequestHandler
from django.db import connections


class _Handler(WSGIRequestHandler):
    disable_nagle_algorithm = True

    def handle(self) -> None:
        try:
            super().handle()
        finally:
            connections.close_all()  # this thread's connections only (they are thread-local)


class _Server(basehttp.WSGIServer):
    # Django's listen backlog is 10: 20 SDKs and 20 chart readers connecting at once got
    # connection resets (e2e_tests/deploy/test_load.py). The kernel caps it at net.core.somaxconn.
    request_queue_size = 1024


class Command(RunserverCommand):
    server_cls = _Server

    def inner_run(self, *args, **options):
        # ``basehttp.run`` builds the server with the module's ``WSGIRequestHandler`` and takes
        # no handler argument: swap in ours.
        basehttp.WSGIRequestHandler = _Handler
        super().inner_run(*args, **options)
