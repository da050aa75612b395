"""Where a finished checkpoint is recorded: the registry over REST (managed mode), or a log line
in local mode. ``CheckpointContext`` registers a checkpoint only after its files are stored."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from headway.client import NotFoundError, RegistryAPI, Session

logger = logging.getLogger("headway.core")


class CheckpointRegistry(Protocol):
    """Where finished checkpoints are recorded (the registry, or a log in local mode)."""

    def register(
        self,
        storage_id: str,
        steps_completed: int,
        resources: dict[str, int],
        metadata: dict[str, Any],
    ) -> None: ...

    def get_metadata(self, storage_id: str) -> dict[str, Any] | None: ...

    def add_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, Any] | None: ...


class LocalCheckpointRegistry:
    """Local mode: log registrations; metadata is read back from ``metadata.json``."""

    def register(
        self,
        storage_id: str,
        steps_completed: int,
        resources: dict[str, int],
        metadata: dict[str, Any],
    ) -> None:
        """Log the checkpoint."""
        logger.info(
            "checkpoint %s at step %d: %d files, %d bytes",
            storage_id,
            steps_completed,
            len(resources),
            sum(resources.values()),
        )

    def get_metadata(self, storage_id: str) -> dict[str, Any] | None:
        """None: read ``metadata.json`` from storage instead."""
        return None

    def add_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, Any] | None:
        """None: update ``metadata.json`` in storage instead."""
        return None


class RESTCheckpointRegistry:
    """Managed mode: ``RegistryAPI.trial_checkpoint_report`` and ``checkpoint_get``.

    Arguments:
        flush_metrics: called before a checkpoint is registered, to deliver the metrics
            reported before it: a run resumes after its latest checkpoint, so metrics still
            queued when it died would otherwise never be reported again.
    """

    def __init__(
        self,
        session: Session,
        trial_id: int,
        run_id: int,
        flush_metrics: Callable[[], object] | None = None,
    ) -> None:
        self._api = RegistryAPI.from_session(session)
        self._trial_id = trial_id
        self._run_id = run_id
        self._flush_metrics = flush_metrics

    def register(
        self,
        storage_id: str,
        steps_completed: int,
        resources: dict[str, int],
        metadata: dict[str, Any],
    ) -> None:
        """Register a stored checkpoint (idempotent on uuid, so the Session's retries are safe)."""
        if self._flush_metrics is not None:
            self._flush_metrics()
        self._api.trial_checkpoint_report(
            self._trial_id,
            uuid=storage_id,
            steps_completed=steps_completed,
            run_id=self._run_id,
            resources=resources,
            metadata=metadata,
            minimal=True,  # the answer is not read: spare the registry the full row
        )

    def get_metadata(self, storage_id: str) -> dict[str, Any] | None:
        """The checkpoint's ``metadata`` in the registry; None (read ``metadata.json`` from
        storage instead) when the registry does not know the checkpoint."""
        try:
            answer = self._api.checkpoint_get(storage_id)
        except NotFoundError:
            return None
        return dict(answer.metadata)

    def add_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, Any] | None:
        """Merge ``metadata`` into the registry's copy; the registry's merged metadata."""
        return self._api.checkpoint_metadata_add(storage_id, metadata).metadata
