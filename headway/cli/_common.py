"""What every command shares: the master URL, the authenticated client (``RegistryAPI``)."""

from __future__ import annotations

import argparse
import os

from headway.client import RegistryAPI, Session, resolve_token

DEFAULT_MASTER = "http://127.0.0.1:8000"
# Experiments and trials stop changing in these states (PAUSED waits for a user to activate).
TERMINAL_STATES = frozenset({"COMPLETED", "CANCELED", "ERROR"})
STOP_FOLLOWING_STATES = TERMINAL_STATES | {"PAUSED"}
# A command line should fail fast when the master is down: ~1.5 s of retries, not a minute.
CLI_MAX_RETRIES = 2
POLL_INTERVAL_S = 1.0


class CLIError(Exception):
    """A user-facing failure: ``main`` prints ``error: <message>`` and exits ``exit_code``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def master_url(args: argparse.Namespace) -> str:
    """``--master``, else ``$HEADWAY_MASTER``, else ``http://127.0.0.1:8000`` (no trailing /)."""
    url = getattr(args, "master", None) or os.environ.get("HEADWAY_MASTER") or DEFAULT_MASTER
    return url.rstrip("/")


def make_session(args: argparse.Namespace, *, authenticated: bool = True) -> Session:
    """A ``Session`` to the chosen master with the user's token (``$HEADWAY_TOKEN`` or login)."""
    master = master_url(args)
    token = resolve_token(master) if authenticated else None
    return Session(master, token, max_retries=CLI_MAX_RETRIES)


def make_api(args: argparse.Namespace, *, authenticated: bool = True) -> RegistryAPI:
    """The typed client over ``make_session(args)``: every command's calls go through it."""
    return RegistryAPI.from_session(make_session(args, authenticated=authenticated))
