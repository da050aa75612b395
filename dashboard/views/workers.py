"""The workers page (``/workers/``): worker hosts grouped by resource pool."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from registry.health import health_report
from registry.scheduling import hosts_by_pool


@require_GET
@login_required
def worker_list(request: HttpRequest) -> HttpResponse:
    """The cluster's component health (``registry.health``), then worker hosts grouped by
    resource pool (each with a summary line: alive hosts, slots in use, queued runs): slots,
    devices, heartbeat, and the trial runs placed on each."""
    context = {
        "pools": hosts_by_pool(),
        "timeout": settings.HEADWAY_HOST_TIMEOUT_SECONDS,
        "health": health_report(),  # the component health block (_component_health.html)
    }
    return render(request, "dashboard/workers.html", context)
