"""The dashboard's webhooks page (``/webhooks/``, admins only: everyone else gets 404, as for an
object they may not see): each webhook with its last delivery, then the recent deliveries."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from registry.authz import is_admin
from webhooks.api import webhooks_with_last_delivery
from webhooks.models import Delivery

RECENT = 50


@require_GET
@login_required
def webhook_list(request: HttpRequest) -> HttpResponse:
    """Webhooks (name, URL, format, events, enabled, last delivery) and the ``RECENT`` newest
    deliveries of all of them (state, attempts, last status and error)."""
    if not is_admin(request.user):
        raise Http404("No such page.")
    context = {
        "webhooks": webhooks_with_last_delivery(),
        "deliveries": Delivery.objects.select_related("webhook").order_by("-id")[:RECENT],
        "recent": RECENT,
    }
    return render(request, "dashboard/webhooks.html", context)
