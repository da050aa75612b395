"""Host tokens on the REST API: who a worker host is, and the routes it may use.

A host sends ``Authorization: Token hwh_...`` like any client. ``HostTokenAuthentication`` comes
first in ``DEFAULT_AUTHENTICATION_CLASSES``: it answers only keys with the host prefix (others go
on to the user/run token authentication) and authenticates them as an *anonymous* user with
``request.auth`` set to the ``HostToken``. So every existing route, whose permission wants an
authenticated user, refuses a host token with 403 without knowing about it; only views that
declare ``permission_classes = [IsHostAgent]`` accept it. A revoked or unknown host key is a 401
on its next request: there is no cache in front of the lookup (one indexed query per call).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission

from headway.client import wire
from registry.authz import is_admin
from registry.models import HostToken, TrialRun
from registry.models.host_token import HOST_KEY_PREFIX, hash_host_key

# ``last_used_at`` is written at most this often per token (a heartbeat every few seconds
# would otherwise be a write each).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def host_token_of(request: Any) -> HostToken | None:
    """The ``HostToken`` when the request used a host key, else None."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, HostToken) else None


class HostTokenAuthentication(BaseAuthentication):
    """Authenticates ``Token hwh_...`` keys as their ``HostToken`` (see module).

    Raises:
        AuthenticationFailed: (401) a host key that is unknown ("Invalid host token.") or
            revoked (``wire.HOST_TOKEN_REVOKED``).
    """

    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[AnonymousUser, HostToken] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].decode(errors="replace") != self.keyword:
            return None
        key = parts[1].decode(errors="replace")
        if not key.startswith(HOST_KEY_PREFIX):
            return None  # a user or run token: HeadwayTokenAuthentication's
        # One query decides both: a revoked token's agent exits, an unknown key's keeps trying.
        # Two (live, then any) could see a token issued between them as revoked and end an
        # agent whose key had just become valid.
        token = HostToken.objects.filter(key_hash=hash_host_key(key)).first()
        if token is None:
            raise AuthenticationFailed("Invalid host token.")
        if token.revoked:
            raise AuthenticationFailed(wire.HOST_TOKEN_REVOKED)
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            HostToken.objects.filter(id=token.id).update(last_used_at=now)
        return AnonymousUser(), token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword


class IsHostAgent(BasePermission):
    """Only host tokens pass (users, admins and run tokens get 403). Which runs a host may
    touch is checked per request (``registry.lifecycle.host_agent``): the ones placed on it."""

    message = "Only a worker host's token may use the host agent routes."

    def has_permission(self, request: Any, view: Any) -> bool:
        return host_token_of(request) is not None


class IsAdmin(BasePermission):
    """Only admins (staff) using a user token or a session; the host-token admin routes."""

    message = "Only an admin may manage host tokens."

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated) or isinstance(request.auth, TrialRun):
            return False
        return is_admin(user)


class HostTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of host keys, required only by the host agent's routes (on
    the others the key authenticates, then is refused)."""

    target_class = HostTokenAuthentication
    name = "hostToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A worker host's token: `Token hwh_...` (docs/security.md).",
        }

    def get_security_requirement(self, auto_schema: Any) -> dict[str, list] | None:  # type: ignore[override]
        permissions = auto_schema.view.get_permissions()
        return {self.name: []} if any(isinstance(p, IsHostAgent) for p in permissions) else None
