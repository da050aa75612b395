"""Single sign-on settings: an OpenID Connect provider named by its issuer, read from the
environment (docs/configuration.md, "Single sign-on").

Unset ``HEADWAY_OIDC_ISSUER``: no single sign-on (local accounts only). Set: the login page
offers the provider next to the password form, and ``accounts`` signs users in through it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import envstr

DISCOVERY_PATH = "/.well-known/openid-configuration"


@dataclass(frozen=True)
class OIDCSettings:
    """One OpenID Connect provider (a relying-party registration at it).

    Attributes:
        issuer (str): the provider's issuer URL; its discovery document is
            ``<issuer>/.well-known/openid-configuration`` (OpenID Connect Discovery 1.0).
        client_id (str), client_secret (str): this installation's registration at the provider.
        scopes (str): space-separated scopes asked for (``openid`` always among them).
        username_claim (str): the claim a new user's username comes from.
        groups_claim (str): the claim listing the user's groups (a list of strings); an
            absent claim is no groups.
        admin_groups (frozenset[str]): members of any of these groups are site admins
            (``is_staff``); others are not. Empty: SSO never changes ``is_staff``.
        name (str): the provider's name on the login button.
    """

    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    username_claim: str
    groups_claim: str
    admin_groups: frozenset[str]
    name: str

    @property
    def discovery_url(self) -> str:
        """The provider's discovery document URL."""
        return self.issuer.rstrip("/") + DISCOVERY_PATH


def oidc_settings() -> OIDCSettings | None:
    """The provider from ``HEADWAY_OIDC_*``; None when ``HEADWAY_OIDC_ISSUER`` is unset.

    Raises:
        ImproperlyConfigured: the issuer is not an http(s) URL, the client id or secret is
            missing, or the scopes lack ``openid`` (the message names the variable).
    """
    issuer = os.environ.get("HEADWAY_OIDC_ISSUER", "").strip()
    if not issuer:
        return None
    parts = urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ImproperlyConfigured(
            f"HEADWAY_OIDC_ISSUER must be the provider's http(s) issuer URL, got {issuer!r}"
        )
    client_id = os.environ.get("HEADWAY_OIDC_CLIENT_ID", "").strip()
    client_secret = os.environ.get("HEADWAY_OIDC_CLIENT_SECRET", "").strip()
    missing = [
        name
        for name, value in (
            ("HEADWAY_OIDC_CLIENT_ID", client_id),
            ("HEADWAY_OIDC_CLIENT_SECRET", client_secret),
        )
        if not value
    ]
    if missing:
        raise ImproperlyConfigured(f"HEADWAY_OIDC_ISSUER is set: {' and '.join(missing)} too")
    scopes = envstr("HEADWAY_OIDC_SCOPES", "openid email profile")
    if "openid" not in scopes.split():
        raise ImproperlyConfigured(f"HEADWAY_OIDC_SCOPES must include openid, got {scopes!r}")
    admin_groups = os.environ.get("HEADWAY_OIDC_ADMIN_GROUPS", "")
    return OIDCSettings(
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        scopes=scopes,
        username_claim=envstr("HEADWAY_OIDC_USERNAME_CLAIM", "preferred_username"),
        groups_claim=envstr("HEADWAY_OIDC_GROUPS_CLAIM", "groups"),
        admin_groups=frozenset(g.strip() for g in admin_groups.split(",") if g.strip()),
        name=envstr("HEADWAY_OIDC_NAME", "single sign-on"),
    )
