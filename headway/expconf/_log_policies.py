"""``log_policies``: act on trial log lines that match a pattern (Determined 0.38's form).

Each policy has a ``name`` and a ``pattern`` (a regular expression searched in each line) and an
``action``. ``cancel_retries`` is honoured: when a failed run printed a matching line, its trial
is not restarted (it ends ERROR whatever ``max_restarts`` says), e.g. for a CUDA out-of-memory
error that a restart would only repeat. ``exclude_node`` (keep the trial off the host it failed
on) is refused: Headway's placement cannot exclude a host per trial. Headway has no default
policies, so a policy with only a ``name`` (Determined's way to disable a default) has nothing to
disable and is accepted as such.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from headway.expconf._base import StrictModel, field_error

CANCEL_RETRIES = "cancel_retries"
_EXCLUDE_NODE_WHY = (
    "not supported: Headway cannot keep one trial off the host it failed on; use "
    "cancel_retries, or drain the host"
)


class LogAction(StrictModel):
    """``action: {type: cancel_retries}`` (``exclude_node`` is refused)."""

    type: Literal["cancel_retries", "exclude_node"]

    @model_validator(mode="after")
    def _refuse_exclude_node(self) -> LogAction:
        if self.type == "exclude_node":
            raise field_error("type", _EXCLUDE_NODE_WHY)
        return self


class LogPolicy(StrictModel):
    """One entry of ``log_policies``.

    Attributes:
        name (str | None): a label (Determined requires it for new-style policies).
        pattern (str | None): a Python regular expression searched in each log line (Determined
            uses Go's RE2 syntax; the common subset is the same).
        action (LogAction | None): what to do when a line matches; the legacy string form
            (``action: cancel_retries``) is accepted too.
    """

    name: Annotated[str, Field(min_length=1)] | None = None
    pattern: Annotated[str, Field(min_length=1)] | None = None
    action: LogAction | None = None

    @field_validator("action", mode="before")
    @classmethod
    def _legacy_action(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _complete(self) -> LogPolicy:
        if self.pattern is not None and self.action is None:
            raise field_error("action", "required with pattern")
        if self.name is None and (self.pattern is None or self.action is None):
            raise field_error("name", "required (or give both pattern and action)")
        return self


def cancels_retries(policies: list[dict[str, Any]], lines: list[str]) -> str | None:
    """The name (or pattern) of the first ``cancel_retries`` policy matching one of ``lines``,
    or None. ``policies`` are stored (validated) ``log_policies`` entries."""
    for policy in policies:
        action = policy.get("action") or {}
        pattern = policy.get("pattern")
        if pattern is None or action.get("type") != CANCEL_RETRIES:
            continue
        compiled = re.compile(pattern)
        if any(compiled.search(line) for line in lines):
            return str(policy.get("name") or pattern)
    return None
