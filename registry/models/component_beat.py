"""``ComponentBeat``: when a cluster component last proved it was working (its health).

The master's Celery worker runs in its own process (often its own container, with its own
``HEADWAY_VAR_DIR``), so the web tier cannot see it directly; the database is the one place both
reach. The worker's lost-run reaper writes its row after every pass (``registry.health``), and
``GET /api/v1/health/`` reports the row's age: a stale one means the worker, its embedded beat or
the broker between them stopped.
"""

from __future__ import annotations

from django.db import models


class ComponentBeat(models.Model):
    """One row per component name (``master_worker``): the time of its last completed beat."""

    name = models.CharField(max_length=64, primary_key=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.beat_at.isoformat()}"
