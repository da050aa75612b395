"""The relying party: authlib's Django client for the provider ``settings.HEADWAY_OIDC``
names (discovery, authorization code flow with PKCE, ID token validation)."""

from __future__ import annotations

from typing import Any

from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.http import Http404

from config.sso import OIDCSettings

_clients: dict[OIDCSettings, Any] = {}


def configured() -> OIDCSettings | None:
    """The provider's settings, or None when single sign-on is off."""
    return getattr(settings, "HEADWAY_OIDC", None)


def client() -> Any:
    """authlib's client of the configured provider (one per settings value: its discovery
    document is fetched once, on first use).

    Raises:
        Http404: single sign-on is not configured.
    """
    oidc = configured()
    if oidc is None:
        raise Http404("single sign-on is not configured")
    if oidc not in _clients:
        oauth = OAuth()
        _clients[oidc] = oauth.register(
            name="headway",
            client_id=oidc.client_id,
            client_secret=oidc.client_secret,
            server_metadata_url=oidc.discovery_url,
            client_kwargs={"scope": oidc.scopes, "code_challenge_method": "S256", "timeout": 10},
        )
    return _clients[oidc]
