"""``RegistryAPI``'s unmanaged-run routes: a script outside the cluster starts its own run with
a user token (``core_v2.init()``), then heartbeats and ends it with the run's token."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from headway.client._api_base import APIBase
from headway.client._api_host import LogLine, _log_lines

if TYPE_CHECKING:  # the wire models load at the first call (pydantic's import cost)
    from headway.client._wire import LogsAccepted
    from headway.client._wire_unmanaged import (
        UnmanagedExited,
        UnmanagedHeartbeat,
        UnmanagedStarted,
    )


class UnmanagedAPI(APIBase):
    """Unmanaged runs (see ``RegistryAPI`` and docs/logging-from-anywhere.md)."""

    def unmanaged_start(
        self,
        *,
        config: dict[str, Any],
        external_experiment_id: str | None = None,
        external_trial_id: str | None = None,
        hparams: dict[str, Any] | None = None,
    ) -> UnmanagedStarted:
        """Find or create the user's unmanaged experiment and trial (by the external ids) and
        start a new run of it; returns ``UnmanagedStarted``. Needs a user token.

        Raises:
            headway.client.BadRequestError: (400) naming the bad field (``config.<field>``,
                ``external_trial_id``, ``hparams``).
        """
        from headway.client import _wire_unmanaged as wire_unmanaged

        body = {
            "config": config,
            "external_experiment_id": external_experiment_id,
            "external_trial_id": external_trial_id,
            "hparams": hparams,
        }
        return wire_unmanaged.UnmanagedStarted.model_validate(self._post("unmanaged_start", body))

    def unmanaged_heartbeat(self, trial_id: int, run_id: int) -> UnmanagedHeartbeat:
        """Renew run ``run_id``'s heartbeat; returns ``UnmanagedHeartbeat``.

        Raises:
            headway.client.ConflictError: (409) the run has ended (e.g. lost).
        """
        from headway.client import _wire_unmanaged as wire_unmanaged

        answer = self._post("unmanaged_heartbeat", None, trial_id=trial_id, run_id=run_id)
        return wire_unmanaged.UnmanagedHeartbeat.model_validate(answer)

    def unmanaged_exit(self, trial_id: int, run_id: int, *, exit_code: int) -> UnmanagedExited:
        """End run ``run_id``: ``exit_code`` 0 completes the trial, another ends it ERROR;
        idempotent. Returns ``UnmanagedExited``."""
        from headway.client import _wire_unmanaged as wire_unmanaged

        body = {"exit_code": exit_code}
        answer = self._post("unmanaged_exit", body, trial_id=trial_id, run_id=run_id)
        return wire_unmanaged.UnmanagedExited.model_validate(answer)

    def unmanaged_logs(self, trial_id: int, run_id: int, lines: Iterable[LogLine]) -> LogsAccepted:
        """Append the script's output lines (``LogLine``: a message, or ``(message, timestamp,
        position)``) to run ``run_id``'s trial logs; the answer counts those stored (a line at
        or below the run's highest stored position is a resend and is not).

        Raises:
            headway.client.ConflictError: (409) the run has ended.
        """
        from headway.client import _wire as wire

        body = {"lines": _log_lines(lines)}
        answer = self._post("unmanaged_logs", body, trial_id=trial_id, run_id=run_id)
        return wire.LogsAccepted.model_validate(answer)
