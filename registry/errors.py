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


class StoredConfigInvalid(RegistryError):
    """409: an experiment's stored ``config`` no longer validates (stored by an older version).

    Raised by ``Experiment.conf``; callers report it (the API answers 409 through its one error
    mapping, a queued run's trial shows ``first_error`` as its scheduling message), never fall
    back to the schema's defaults. ``errors`` maps each bad field's dotted path (``config.``
    prefixed, e.g. ``config.resources.slots_per_trial``) to its messages.
    """

    status = 409

    def __init__(self, experiment_id: int, errors: dict[str, list[str]]) -> None:
        self.experiment_id = experiment_id
        path, messages = next(iter(errors.items()), ("config", ["invalid"]))
        # ``first_error``: the first bad field and its message, one line (a trial's message).
        self.first_error = f"{path}: {messages[0]}"
        named = {f"config.{path}" if path != "config" else path: m for path, m in errors.items()}
        super().__init__(
            f"the stored config of experiment {experiment_id} is invalid: {self.first_error} "
            "(it was stored by an older version; kill the experiment and submit it again)",
            named,
        )
