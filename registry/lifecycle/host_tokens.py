"""Host tokens: issued and revoked by admins (REST, ``headway host-token``, ``manage.py
headway_host_token``), all through these functions (``registry.models.HostToken``)."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from registry.errors import IllegalTransition, RegistryError
from registry.models import HostToken


class TokenNotFound(RegistryError):
    """404: the host has no live token."""

    status = 404


def host_token_info(token: HostToken) -> dict:
    """A token's ``HostTokenInfo`` fields (never its key)."""
    return {
        "name": token.name,
        "created_at": token.created_at,
        "created_by": token.created_by.get_username() if token.created_by else None,
        "revoked_at": token.revoked_at,
        "last_used_at": token.last_used_at,
    }


def host_token_issue(name: str, created_by: object | None) -> tuple[HostToken, str]:
    """Issue a token for host ``name``; return it and its key.

    Raises:
        IllegalTransition: (409) ``name`` has a live token (revoke it first).
    """
    if HostToken.objects.live().filter(name=name).exists():
        raise IllegalTransition(f"Host {name} already has a live token; revoke it first.")
    try:
        with transaction.atomic():
            return HostToken.issue(name, created_by=created_by)
    except IntegrityError:  # issued by someone else in between
        raise IllegalTransition(f"Host {name} already has a live token; revoke it first.") from None


def host_token_revoke(name: str) -> HostToken:
    """Revoke host ``name``'s live token (its next request is refused).

    Raises:
        TokenNotFound: (404) ``name`` has no live token.
    """
    token = HostToken.objects.live().filter(name=name).first()
    if token is None:
        raise TokenNotFound(f"Host {name} has no live token.")
    HostToken.objects.filter(id=token.id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    return token
