"""The workers page's host controls (admins): enable, drain, disable and remove a host.

``POST /workers/<name>/<action>`` (CSRF-protected like every dashboard form) calls the same
``registry.lifecycle.host_ops`` functions as ``/api/v1/hosts/`` and ``headway host``, then goes
back to the workers page with the outcome as a note. Anyone but an admin gets 403.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from dashboard.views._common import back
from registry.authz import is_admin
from registry.errors import RegistryError
from registry.lifecycle import host_ops

# action -> (service, past tense for the note)
HOST_ACTIONS: dict[str, tuple[Callable[[str], dict], str]] = {
    "enable": (host_ops.host_enable, "enabled"),
    "drain": (partial(host_ops.host_disable, drain=True), "draining"),
    "disable": (partial(host_ops.host_disable, drain=False), "disabled"),
    "remove": (host_ops.host_remove, "removed"),
}


@require_POST
@login_required
def host_control(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """``POST /workers/<name>/<action>``: one of ``HOST_ACTIONS``; back to ``next`` (default the
    workers page) with ``Host <name>: <state>`` or the refusal's reason (e.g. the runs a host
    to remove still holds).

    Raises:
        PermissionDenied: (403) the user is not an admin.
        Http404: an unknown action.
    """
    if not is_admin(request.user):
        raise PermissionDenied("Only an admin may operate hosts.")
    if action not in HOST_ACTIONS:
        raise Http404(f"Unknown host control {action!r}.")
    service, done = HOST_ACTIONS[action]
    try:
        service(name)
    except RegistryError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Host {name}: {done}")
    return back(request, "dashboard:workers")
