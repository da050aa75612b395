"""Login page with the provider's button, and the two legs of the authorization code flow:
``sso/login/`` sends the browser to the provider, ``sso/callback/`` takes its answer."""

from __future__ import annotations

from typing import Any

import requests
from authlib.integrations.base_client import OAuthError
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from accounts.oidc_client import client, configured
from accounts.provisioning import SignInRefused, signed_in_user
from config.login_forms import LoginForm

_NEXT = "headway_sso_next"


class LoginView(auth_views.LoginView):
    """Django's login view, with the single sign-on button when a provider is configured."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        oidc = configured()
        context["sso_name"] = oidc.name if oidc else None
        return context


def _safe_next(request: HttpRequest, target: str | None) -> str:
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return "/"


def _refused(request: HttpRequest, why: str, status: int) -> HttpResponse:
    """The login page again, saying why single sign-on did not sign the user in."""
    oidc = configured()
    return render(
        request,
        "registration/login.html",
        {"form": LoginForm(request), "sso_error": why, "sso_name": oidc.name if oidc else None},
        status=status,
    )


def sso_login(request: HttpRequest) -> HttpResponse:
    """GET: redirect to the provider's authorization endpoint (``state``, ``nonce`` and a
    PKCE verifier kept in the session); ``?next=`` is where the callback goes afterwards.
    404 when single sign-on is not configured, 502 when the provider cannot be reached."""
    provider = client()
    request.session[_NEXT] = _safe_next(request, request.GET.get("next"))
    redirect_uri = request.build_absolute_uri(reverse("sso-callback"))
    try:
        return provider.authorize_redirect(request, redirect_uri)
    except requests.RequestException as exc:
        return _refused(request, f"the sign-on provider could not be reached ({exc})", 502)


def sso_callback(request: HttpRequest) -> HttpResponse:
    """GET: exchange the provider's code for tokens (the ID token's signature, issuer,
    audience and nonce checked by authlib), read the user's claims (ID token, then the
    userinfo endpoint), sign the user in and go to the ``next`` of ``sso_login``.
    The login page with the reason otherwise: 400 for a refused or forged answer, 403 for a
    sign-in Headway refuses (``SignInRefused``), 502 when the provider cannot be reached."""
    provider = client()
    try:
        token = provider.authorize_access_token(request)
        claims = dict(token.get("userinfo") or {})
        if provider.load_server_metadata().get("userinfo_endpoint"):
            extra = dict(provider.userinfo(token=token))
            if extra.get("sub") != claims.get("sub"):
                return _refused(request, "the provider's userinfo names another subject", 400)
            claims = {**extra, **claims}  # the signed ID token wins where both say
    except OAuthError as exc:
        why = exc.description or exc.error or "no reason given"
        return _refused(request, f"the sign-on provider's answer was refused: {why}", 400)
    except requests.RequestException as exc:
        return _refused(request, f"the sign-on provider could not be reached ({exc})", 502)
    oidc = configured()
    assert oidc is not None  # client() raised otherwise
    try:
        user = signed_in_user(oidc, claims)
    except SignInRefused as exc:
        return _refused(request, str(exc), 403)
    target = request.session.pop(_NEXT, "/")
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return HttpResponseRedirect(_safe_next(request, target))
