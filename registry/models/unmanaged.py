"""``UnmanagedRun``: the heartbeat of a run that a script started itself (``core_v2.init()``).

Kept apart from ``TrialRun.heartbeat_at`` on purpose: that column is the lease of a run placed
on a host, which the managed reaper re-queues when it lapses. An unmanaged run has no host and
no launcher to re-queue it on; when its heartbeats stop it is lost and its trial ends ERROR
(``registry.lifecycle.reap_lost_unmanaged_runs``), so its ``TrialRun.heartbeat_at`` stays NULL.
"""

from typing import ClassVar

from django.db import models
from django.utils import timezone


class UnmanagedRun(models.Model):
    """One ``TrialRun`` of an unmanaged trial and the time its script last heartbeated."""

    run = models.OneToOneField(
        "registry.TrialRun", on_delete=models.CASCADE, primary_key=True, related_name="unmanaged"
    )
    heartbeat_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes: ClassVar[list[models.Index]] = [models.Index(fields=["heartbeat_at"])]

    def __str__(self) -> str:
        return f"Unmanaged run {self.run_id}"
