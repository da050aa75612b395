"""``manage.py runserver`` with Nagle's algorithm off on accepted connections.

Django's dev server (wsgiref) sends the status line + headers and the body in separate
``send()`` calls. With Nagle on, the body waits for the client's delayed ACK, so every request
on a keep-alive connection (the SDK's ``requests.Session``) costs ~40 ms on Linux instead of
<1 ms (bench/metrics_ingest.py). ``socketserver.StreamRequestHandler.disable_nagle_algorithm``
sets TCP_NODELAY on each accepted socket.

Overrides ``django.contrib.staticfiles``' runserver (``registry`` is listed before it in
INSTALLED_APPS); static files are served by WhiteNoise's middleware, not by this command.
"""

from django.core.management.commands.runserver import Command as RunserverCommand
from django.core.servers.basehttp import WSGIRequestHandler


class Command(RunserverCommand):
    def inner_run(self, *args, **options):
        WSGIRequestHandler.disable_nagle_algorithm = True
        super().inner_run(*args, **options)
