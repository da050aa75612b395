"""This host's connection to the master: the typed REST client with the host token.

Every call the host agent makes goes through ``api()`` (``headway.client.RegistryAPI``, one per
thread: the heartbeat, the placement of each run and the lease watchdog call at the same time).
``is_master_unavailable`` says which failures a retry may fix (the master or its database
restarting, the network cut); ``is_refused`` which ones mean this host's token no longer
works (revoked: the host stops its runs, as a host that lost its lease).
"""

from __future__ import annotations

import threading

import requests

from headway.client import APIError, RegistryAPI, Session, UnauthenticatedError, wire
from workers.config import settings

REQUEST_TIMEOUT_S = 15.0  # one call; a lease outlives several
RETRIES = 2  # per call, for connection errors and 429/502/503/504 (then the caller's loop)

_local = threading.local()


def api() -> RegistryAPI:
    """This thread's client of the master at ``HEADWAY_MASTER`` with ``HEADWAY_HOST_TOKEN``."""
    key = (settings.HEADWAY_MASTER_URL, settings.HEADWAY_HOST_TOKEN)
    client: RegistryAPI | None = getattr(_local, "api", None)
    if client is None or getattr(_local, "key", None) != key:
        session = Session(
            settings.HEADWAY_MASTER_URL,
            settings.HEADWAY_HOST_TOKEN,
            max_retries=RETRIES,
            timeout=REQUEST_TIMEOUT_S,
        )
        client = RegistryAPI.from_session(session)
        _local.api, _local.key = client, key
    return client


def is_master_unavailable(exc: BaseException) -> bool:
    """True for failures a later retry may fix: no answer (connection refused or cut, a
    timeout) or a 5xx / 429 answer (the master overloaded, restarting, its database down)."""
    if isinstance(exc, requests.RequestException):
        return True
    if isinstance(exc, APIError):
        return exc.status is None or exc.status == 429 or exc.status >= 500
    return False


def is_refused(exc: BaseException) -> bool:
    """True when the master refuses this host's token (401: revoked or unknown)."""
    return isinstance(exc, UnauthenticatedError) and exc.status == 401


def is_revoked(exc: BaseException) -> bool:
    """True when the master refuses this host's token because an admin revoked it (not an
    unknown key): the agent then exits (``workers.hosts``)."""
    return is_refused(exc) and wire.HOST_TOKEN_REVOKED in str(exc)


def refusal(exc: BaseException) -> str:
    """Why this host stops every run when the master refuses its token (``is_refused``): the
    line for the worker's and the trials' logs."""
    return f"the master refused host {settings.HEADWAY_HOST_NAME}'s token (revoked?): {exc}"
