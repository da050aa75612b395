"""A WSGI app answering the id of the thread that served the request (for
tests/config/test_gunicorn_worker.py)."""

from __future__ import annotations

import threading


def app(environ, start_response):
    """``200`` with the serving thread's id as the body."""
    body = str(threading.get_ident()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
