"""What several dashboard pages' views share: the way back after a POST, the owner checks, the
control lookup and the GET / POST flow of the edit forms. Not views themselves.

After a POST a view goes back to the form's ``next`` field (the page it was posted from) when it
is a same-host path (Django's ``url_has_allowed_host_and_scheme``, the check its login view uses)
and to a fallback page otherwise, so an outside ``next`` can never turn a control into an open
redirect. Only the owner or an admin may change an object (``registry.authz``, the rule the REST
API applies); anyone else gets 403 naming the owner rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme

from dashboard.edit_forms import EditForm
from registry import authz
from registry.errors import InvalidInput, RegistryError

EDIT_PAGE = "dashboard/_edit_page.html"


def back(request: HttpRequest, fallback: str, *args: Any) -> HttpResponse:
    """Redirect to the form's ``next`` when it is a path on this host, else to ``fallback``.

    ``fallback`` is a URL name (or a path), resolved with ``args``. Absolute URLs, ``//host`` and
    other schemes are refused (``url_has_allowed_host_and_scheme`` with no allowed host but ours).
    """
    target = request.POST.get("next", "")
    safe = (
        target.startswith("/")
        and not target.startswith("//")
        and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
    )
    return redirect(target if safe else resolve_url(fallback, *args))


def bad_request(message: str) -> HttpResponse:
    """A 400 whose body is ``message`` as plain text (UTF-8). A message that repeats what the
    request sent (a path, an action) must never be served as HTML: the CSP stops an injected
    script, not an injected ``<meta http-equiv="refresh">`` or a fake form."""
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


def control_service(table: dict[str, Callable[..., Any]], action: str) -> Callable[..., Any]:
    """The lifecycle function of ``action`` in ``table`` (``dashboard.controls``).

    Raises:
        Http404: an action the table does not have.
    """
    try:
        return table[action]
    except KeyError:
        raise Http404(f"Unknown control {action!r}.") from None


def ensure(check: Callable[[Any, int], None], request: HttpRequest, object_id: int) -> None:
    """Run an ``authz`` check for the request's user; its refusal becomes Django's 403 (404
    where the user has no role in the object's workspace)."""
    try:
        check(request.user, object_id)
    except authz.Hidden as exc:
        raise Http404(exc.detail) from None
    except authz.NotPermitted as exc:
        raise PermissionDenied(exc.detail) from None


def ensure_owner(
    user: Any, owner_id: int | None, what: str, workspace_id: int | None = None
) -> None:
    """403 (Django's ``PermissionDenied``) unless ``authz.can_change``; 404 without a role in
    ``workspace_id``."""
    try:
        authz.ensure_can_change(user, owner_id, what, workspace_id)
    except authz.Hidden as exc:
        raise Http404(exc.detail) from None
    except authz.NotPermitted as exc:
        raise PermissionDenied(exc.detail) from None


def edit_page(
    request: HttpRequest,
    *,
    form_class: type[EditForm],
    initial: dict[str, Any],
    save: Callable[[dict[str, Any]], object],
    title: str,
    done: str,
    back_to: str,
) -> HttpResponse:
    """The shared GET / POST flow of every edit view (the user is already allowed).

    ``GET`` renders a page with the form (for a direct link or a browser without ``<details>``).
    A ``POST`` (CSRF-protected) that saves redirects to the form's ``next`` (see ``back``) with a
    note; on bad input it answers 400 with the form again, the typed values kept and each error
    on the field it names, nothing saved.

    Arguments:
        save: calls the service with the form's cleaned values; raises its errors.
        done: the success note. back_to: the object's page (the default ``next``).
    """
    if request.method == "POST":
        form = form_class(request.POST)
        if form.is_valid():
            try:
                save(form.changes())
            except InvalidInput as exc:
                form.add_service_errors(exc)
            except RegistryError as exc:  # e.g. 409: the experiment is being deleted
                messages.error(request, exc.detail)
                return back(request, back_to)
            else:
                messages.success(request, done)
                return back(request, back_to)
    else:
        form = form_class(initial=initial)
    context = {
        "form": form,
        "title": title,
        "action": request.path,
        "next_path": request.POST.get("next") or request.GET.get("next") or back_to,
        "back": back_to,
    }
    return render(request, EDIT_PAGE, context, status=400 if request.method == "POST" else 200)
