"""``log_policies`` at a failed run's exit: a ``cancel_retries`` match ends the trial's retries.

The worker writes a run's output lines before it reports the exit, so they are all here when
the lifecycle decides whether to restart (``headway.expconf._log_policies``).
"""

from __future__ import annotations

from django.utils import timezone

from headway.expconf._log_policies import cancels_retries
from registry.models import Trial, TrialLog, TrialRun

MAX_LINES_SCANNED = 20_000  # the run's last lines: a failure's message is near its end


def retries_cancelled(trial: Trial, run: TrialRun) -> bool:
    """True when a ``cancel_retries`` policy of the trial's config matches one of the failed
    run's log lines; the trial's log then says which policy stopped the retries."""
    policies = [p.model_dump(mode="json") for p in trial.experiment.conf.log_policies]
    if not policies:
        return False
    lines = list(
        TrialLog.objects.filter(trial=trial, run_id=run.run_id)
        .order_by("-id")
        .values_list("message", flat=True)[:MAX_LINES_SCANNED]
    )
    matched = cancels_retries(policies, lines)
    if matched is None:
        return False
    TrialLog.objects.create(
        trial=trial,
        run_id=run.run_id,
        timestamp=timezone.now(),
        message=f"[headway] log policy {matched!r} matched (cancel_retries): not restarting",
    )
    return True
