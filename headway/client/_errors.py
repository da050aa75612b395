"""Typed errors for REST answers, so callers branch on a class instead of a status code."""

from __future__ import annotations

from typing import Any


class APIError(Exception):
    """A request the registry answered with an error status (or never answered).

    Attributes:
        status (int | None): HTTP status, None when the server could not be reached.
        body (Any): the decoded JSON body, or the text when it was not JSON.
    """

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class MasterUnreachableError(APIError):
    """The registry stayed unreachable (or overloaded) longer than the session's outage budget
    (``HEADWAY_MASTER_OUTAGE_SECONDS`` in trial processes)."""


class BadRequestError(APIError):
    """400/413/422: the request was invalid; the message names the field."""


class UnauthenticatedError(APIError):
    """401/403: missing, wrong or out-of-scope token."""


class NotFoundError(APIError):
    """404: the experiment, trial or checkpoint does not exist."""


class ConflictError(APIError):
    """409: an illegal state transition; the message says the current state."""


def error_for_status(status: int, message: str, body: Any) -> APIError:
    """Map an HTTP error status to the matching ``APIError`` subclass."""
    if status in (400, 413, 422):
        return BadRequestError(message, status, body)
    if status in (401, 403):
        return UnauthenticatedError(message, status, body)
    if status == 404:
        return NotFoundError(message, status, body)
    if status == 409:
        return ConflictError(message, status, body)
    return APIError(message, status, body)


def describe_error_body(body: Any) -> str:
    """Flatten the registry's error JSON (``detail`` + ``errors`` map) into one readable line."""
    if not isinstance(body, dict):
        return str(body)[:500]
    parts = []
    if body.get("detail"):
        parts.append(str(body["detail"]))
    errors = body.get("errors")
    if isinstance(errors, dict):
        for field, messages in errors.items():
            if isinstance(messages, list):
                messages = "; ".join(str(m) for m in messages)
            parts.append(f"{field}: {messages}")
    return " | ".join(parts) if parts else str(body)[:500]
