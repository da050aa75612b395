"""Storing a run's output lines sent by its host (``append_logs``), each line once.

A batch whose answer the host never got (a timeout, the master restarted, the agent died) is
sent again: by the same agent's next flush, or by a restarted agent that re-reads the run's
output file from the offset it had recorded (``workers.reattach``). So a line may carry its
``position`` in the run's output (the pipe's line number, or the output file's byte offset just
past it), and the run (or share) keeps the highest position stored, ``log_position``: a line at
or below it was stored already and is skipped. The mark moves by a compare-and-set in the same
transaction as the insert (no extra read: the row is read anyway to check the host; a lost race
re-reads it), so concurrent senders of one run never both store a line. The idea is an
idempotency key per producer position, as a Kafka producer's sequence numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from headway.exec.loglines import clean_line
from registry.lifecycle._host_access import placed_run, placed_share
from registry.models import RunShare, TrialLog, TrialRun

_LOG_INSERT_BATCH = 500  # rows an INSERT, as the worker's log writer

# (message, timestamp or None: now, position or None: none)
LogLine = tuple[str, datetime | None] | tuple[str, datetime | None, int | None]


def append_logs(
    host: str,
    trial_id: int,
    run_id: int,
    lines: Sequence[LogLine],
    *,
    node_rank: int = 0,
) -> int:
    """Store output lines of a run (``node_rank`` 0) or of this host's share of it; each line
    cleaned and cut (``headway.exec.loglines.clean_line``). A line whose position is at or
    below the highest one stored for the run (or share) is skipped; a line without position is
    stored (clients before positions). Positions should increase within ``lines``; one that
    does not is skipped as a resent line. Returns how many were stored.

    Raises:
        NotFound, NotPermitted: as ``placed_run`` / ``placed_share``.
    """
    if node_rank:
        part: TrialRun | RunShare = placed_share(host, trial_id, run_id, node_rank)
    else:
        part = placed_run(host, trial_id, run_id)
    return store_lines(part, trial_id, run_id, lines)


def store_lines(
    part: TrialRun | RunShare, trial_id: int, run_id: int, lines: Sequence[LogLine]
) -> int:
    """``append_logs`` once the sender may write to ``part`` (the run, or the share, whose
    ``log_position`` marks the lines stored): store the lines past its mark as logs of run
    ``run_id`` of ``trial_id``; returns how many were stored."""
    limit = settings.HEADWAY_MAX_LOG_LINE_CHARS
    now = timezone.now()
    mark = part.log_position
    with transaction.atomic():
        while True:
            kept, top = _past(lines, mark)
            if top == mark:
                break
            rows = type(part).objects.filter(pk=part.pk, log_position=mark)
            if rows.update(log_position=top):
                break
            # Another request stored lines meanwhile: filter against its mark.
            fresh = type(part).objects.filter(pk=part.pk).values_list("log_position", flat=True)
            current = fresh.first()
            if current is None:  # deleted meanwhile (its experiment was): nothing to add to
                return 0
            mark = current
        rows_to_store = [
            TrialLog(
                trial_id=trial_id,
                run_id=run_id,
                message=clean_line(line[0], limit),
                timestamp=line[1] or now,
            )
            for line in kept
        ]
        TrialLog.objects.bulk_create(rows_to_store, batch_size=_LOG_INSERT_BATCH)
    return len(rows_to_store)


def _past(lines: Sequence[LogLine], mark: int) -> tuple[list[LogLine], int]:
    """The lines to store past ``mark``, and the new mark: a positioned line is kept when its
    position is above every one stored or kept before it (a line out of order is taken for a
    resent one); a line without a position is kept."""
    kept = []
    for line in lines:
        position = line[2] if len(line) > 2 else None
        if position is not None:
            if position <= mark:
                continue
            mark = position
        kept.append(line)
    return kept, mark
