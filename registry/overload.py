"""A database that cannot serve right now is a 503 with ``Retry-After``, never a 500.

"Cannot serve right now": no pooled connection became free within
``HEADWAY_DB_POOL_TIMEOUT_SECONDS`` (``psycopg_pool.PoolTimeout``), the server refused a new
connection ("too many clients", "the database system is starting up"), a connection broke
(a restart), or SQLite stayed locked past its busy timeout. These are DB-API's
``OperationalError`` and ``InterfaceError`` ("errors related to the database's operation and
not necessarily under the control of the programmer", PEP 249), which Django re-raises as
``django.db.OperationalError`` / ``InterfaceError``. A retry can succeed, so the answer says
when to retry: the SDK's session (``headway.client``) waits ``Retry-After`` and sends the
request again; a browser shows a short page.

The REST API maps them in its exception handler (``registry.api.errors``); the
``DatabaseUnavailableMiddleware`` catches what other views raise (dashboard pages, login), and
``server_error`` (``handler500``) what middleware raises (a session saved after the view).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from config.database import RETRY_AFTER_SECONDS

logger = logging.getLogger("headway.overload")

DETAIL = "The database is busy or unavailable right now; retry after a few seconds."


def is_database_unavailable(exc: BaseException) -> bool:
    """True for a database error a retry can cure (see the module docstring)."""
    return isinstance(exc, OperationalError | InterfaceError)


def _log(exc: BaseException) -> None:
    logger.warning("database unavailable, answering 503: %s", str(exc).strip().splitlines()[0:1])


def api_body(exc: BaseException) -> dict[str, object]:
    """The JSON body of the REST API's 503, in its error shape (``detail``, ``errors``)."""
    _log(exc)
    return {"detail": DETAIL, "errors": {}}


def unavailable_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """A 503 with ``Retry-After``: JSON under ``/api/``, a short text page elsewhere."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse(api_body(exc), status=503)
    else:
        _log(exc)
        response = HttpResponse(
            f"503 Service Unavailable\n\n{DETAIL}\n", status=503, content_type="text/plain"
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseUnavailableMiddleware:
    """Turns a view's transient database error into ``unavailable_response`` (Django calls
    ``process_exception`` for exceptions raised by views, DRF's included when its handler
    passes them on)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_database_unavailable(exception):
            return unavailable_response(request, exception)
        return None


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: ``unavailable_response`` when the uncaught exception (Django calls this
    inside its ``except`` block) is a transient database error; else a JSON 500 in the API's
    error shape under ``/api/`` and Django's page elsewhere."""
    exc = sys.exc_info()[1]
    if exc is not None and is_database_unavailable(exc):
        return unavailable_response(request, exc)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error.", "errors": {}}, status=500)
    return defaults.server_error(request)
