"""A trial's log pages: the viewer (``/trials/<id>/logs/``) and the whole log as a text download.

The viewer shows the last ``selectors.LOG_TAIL_LINES`` lines (or those matching ``?q=``);
``static/js/logs.js`` parses each line's level and rank in the browser (filters, error
highlighting, jump to the first error) and tails new lines while the trial runs. The download
streams every line, oldest first, the way ``headway trial logs`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from dashboard import selectors
from registry.authz import scoped
from registry.models import Trial, TrialLog

DOWNLOAD_CHUNK_LINES = 2000  # rows fetched per database round trip while streaming


@require_GET
@login_required
def trial_log_list(request: HttpRequest, trial_id: int) -> HttpResponse:
    """The last lines a trial printed (all runs), oldest first; ``?q=`` keeps matching lines.

    Every logged-in user may read every trial, as in the REST API. Without a search,
    ``static/js/logs.js`` tails new lines live from the REST logs endpoint (``?after=<last id>``)
    until the trial ends.
    """
    trial = get_object_or_404(
        scoped(Trial.objects.select_related("experiment"), request.user), id=trial_id
    )
    query = request.GET.get("q", "").strip()[:200]
    lines = selectors.trial_log_tail(trial, query=query)
    context = {
        "trial": trial,
        "lines": lines,
        "limit": selectors.LOG_TAIL_LINES,
        "query": query,
        "last_id": lines[-1].id if lines else 0,
    }
    return render(request, "dashboard/trial_logs.html", context)


def _log_text(trial_id: int) -> Iterator[bytes]:
    """Every log line of the trial, oldest first, one ``message\\n`` each, a chunk at a time.

    A server-side cursor on PostgreSQL (``iterator``), so memory stays bounded however long the
    log is; lines written while the download runs may or may not be included.
    """
    messages = (
        TrialLog.objects.filter(trial_id=trial_id)
        .order_by("id")
        .values_list("message", flat=True)
        .iterator(chunk_size=DOWNLOAD_CHUNK_LINES)
    )
    batch: list[str] = []
    for message in messages:
        batch.append(message.rstrip("\n"))
        if len(batch) >= DOWNLOAD_CHUNK_LINES:
            yield ("\n".join(batch) + "\n").encode()
            batch = []
    if batch:
        yield ("\n".join(batch) + "\n").encode()


@require_GET
@login_required
def trial_log_download(request: HttpRequest, trial_id: int) -> StreamingHttpResponse:
    """The trial's whole log as ``trial-<id>-logs.txt`` (UTF-8 text, streamed).

    Readable by every logged-in user, as the logs page; 404 for an unknown trial.
    """
    get_object_or_404(scoped(Trial.objects.only("id"), request.user), id=trial_id)
    response = StreamingHttpResponse(_log_text(trial_id), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="trial-{trial_id}-logs.txt"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
