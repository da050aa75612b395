"""Domain errors raised by registry services; the API maps them to status codes in one place."""

from __future__ import annotations


class RegistryError(Exception):
    """Base class; ``status`` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, detail: str, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or {}


class InvalidInput(RegistryError):
    """400: bad input; ``errors`` maps each field path to its messages."""

    def __init__(self, errors: dict[str, list[str]], detail: str | None = None) -> None:
        first = next(iter(errors.items()), ("input", ["invalid"]))
        super().__init__(detail or f"Invalid {first[0]}: {first[1][0]}", errors)


class PayloadTooLarge(RegistryError):
    """413: an upload over its size limit."""

    status = 413


class IllegalTransition(RegistryError):
    """409: the requested state change is not allowed from the current state."""

    status = 409
