"""``RegistryAPI``'s trial routes: what a trial's own process (its run token) reports and reads
through the Core API (metrics, checkpoints, preemption, progress, searcher operations)."""

from __future__ import annotations

from typing import Any

from headway.client._api_base import APIBase
from headway.client._lazy_wire import wire

_JSON = {"Content-Type": "application/json"}


class TrialAPI(APIBase):
    """The Core API's calls for one trial (see ``RegistryAPI``)."""

    def trial_metrics_report(self, trial_id: int, body: bytes) -> None:
        """POST a batch of metric reports already encoded as ``{"reports": [...]}`` JSON bytes
        (the reporter thread joins the reports it encoded in the training thread; the answer,
        ``MetricsAccepted``, is not read). Stored idempotently on ``(trial, group,
        steps_completed)``, so a retried batch is harmless."""
        path = self.path("trial_metrics_report", "POST", trial_id=trial_id)
        self.session.request("POST", path, data=body, headers=_JSON)

    def trial_checkpoint_report(
        self,
        trial_id: int,
        *,
        uuid: str,
        steps_completed: int,
        run_id: int,
        resources: dict[str, int],
        metadata: dict[str, Any],
        minimal: bool = False,
    ) -> dict[str, Any]:
        """Register a checkpoint stored by run ``run_id`` (``resources``: relative path ->
        bytes); idempotent on ``uuid``. Returns the ``CheckpointSerializer`` row, or with
        ``minimal`` (``Prefer: return=minimal``) only ``wire.CheckpointRegistered``'s fields,
        which spares the registry the row's metrics and ranking."""
        body = {
            "uuid": uuid,
            "steps_completed": steps_completed,
            "run_id": run_id,
            "resources": resources,
            "metadata": metadata,
        }
        path = self.path("trial_checkpoint_report", "POST", trial_id=trial_id)
        if minimal:
            headers = {"Prefer": "return=minimal"}
            answer = self.session.request("POST", path, json=body, headers=headers).json()
            return wire.CheckpointRegistered.model_validate(answer).model_dump()
        row: dict[str, Any] = self.session.post(path, json=body)
        return row

    def trial_preempt_poll(self, trial_id: int, *, run_id: int, timeout: int) -> wire.ShouldPreempt:
        """Whether run ``run_id`` was asked to stop; the registry holds the request up to
        ``timeout`` seconds (<= 60) waiting for a stop request."""
        params = {"run_id": run_id, "timeout": timeout}
        answer = self._get("trial_preempt_poll", params, trial_id=trial_id)
        return wire.ShouldPreempt.model_validate(answer)

    def trial_preempt_ack(self, trial_id: int, *, run_id: int | None) -> wire.PreemptAcknowledged:
        """Run ``run_id`` saw its stop request and exits (its exit 0 means "resume me later")."""
        answer = self._post("trial_preempt_ack", {"run_id": run_id}, trial_id=trial_id)
        return wire.PreemptAcknowledged.model_validate(answer)

    def trial_progress(self, trial_id: int, progress: float) -> wire.ProgressRecorded:
        """Record how far the trial got, a fraction in [0, 1]."""
        answer = self._post("trial_progress", {"progress": progress}, trial_id=trial_id)
        return wire.ProgressRecorded.model_validate(answer)

    def trial_searcher_completed(
        self, trial_id: int, *, length: int, metric: Any
    ) -> wire.OperationRecorded:
        """Report the searcher operation trained to ``length`` and its searcher ``metric``."""
        body = {"length": length, "metric": metric}
        answer = self._post("trial_searcher_completed", body, trial_id=trial_id)
        return wire.OperationRecorded.model_validate(answer)

    def trial_searcher_early_exit(self, trial_id: int, reason: str) -> wire.EarlyExitRecorded:
        """The trial leaves its search early (``reason``: errored, user_canceled, invalid_hp)."""
        answer = self._post("trial_searcher_early_exit", {"reason": reason}, trial_id=trial_id)
        return wire.EarlyExitRecorded.model_validate(answer)

    def checkpoint_metadata_add(
        self, uuid: str, metadata: dict[str, Any]
    ) -> wire.CheckpointMetadataMerged:
        """Merge ``metadata`` into the checkpoint's (keys there are replaced); the trial's own
        run or the experiment's owner. Returns the whole merged metadata."""
        answer = self._post("checkpoint_metadata_add", {"metadata": metadata}, uuid=uuid)
        return wire.CheckpointMetadataMerged.model_validate(answer)
