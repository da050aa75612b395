"""``HostToken``: the credential a worker host uses to talk to the master.

An admin issues one per host name (``manage.py headway_host_token NAME --create``, the REST API or
``headway host-token create NAME``); the token's name is the only host name it may register
and heartbeat as, and it reaches only the runs placed on that host (``registry.api.host_auth``).
Only a SHA-256 digest of the key is stored (a leaked database dump holds no usable key); the key
is shown once, when it is created. A revoked token keeps its row (who, when) and is refused from
the next request on: there is no cache in front of the lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

# Every host key starts with this, so the authentication can tell it from a user or run token
# without a database lookup, and secret scanners can recognise a leaked one (GitHub's "ghp_").
HOST_KEY_PREFIX = "hwh_"
# Same alphabet and validation as WorkerHost names in the API (WorkerHostViewSet).
HOST_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]*"


def hash_host_key(key: str) -> str:
    """The stored form of a host key: its SHA-256 hex digest.

    A plain digest suffices (no salt or slow hash): keys are 160 random bits, not passwords,
    so there is nothing to guess; a lookup stays one indexed equality.
    """
    return hashlib.sha256(key.encode()).hexdigest()


class HostTokenQuerySet(models.QuerySet):
    """Lookups of host tokens."""

    def live(self) -> HostTokenQuerySet:
        """Tokens not revoked."""
        return self.filter(revoked_at__isnull=True)

    def for_key(self, key: str) -> HostToken | None:
        """The live token whose key is ``key``; None for an unknown or revoked key."""
        if not key.startswith(HOST_KEY_PREFIX):
            return None
        return self.live().filter(key_hash=hash_host_key(key)).first()


class HostToken(models.Model):
    """A host's credential: ``name`` is the host it stands for (``HEADWAY_HOST_NAME``).

    At most one live token per name (a partial unique constraint); revoked ones stay as a
    record. ``issue()`` creates one and returns its key, which is never stored.
    """

    name = models.CharField(max_length=200)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Last authenticated request (updated at most once a minute: see registry.api.host_auth).
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = HostTokenQuerySet.as_manager()

    class Meta:
        ordering: ClassVar[list[str]] = ["name", "-created_at"]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(revoked_at__isnull=True),
                name="one_live_host_token_per_name",
            ),
        ]

    def __str__(self) -> str:
        return f"Host token {self.name}{' (revoked)' if self.revoked_at else ''}"

    @property
    def revoked(self) -> bool:
        """Whether the token was revoked."""
        return self.revoked_at is not None

    @classmethod
    def issue(cls, name: str, created_by: object | None = None) -> tuple[HostToken, str]:
        """Create a live token for host ``name``; return it and its key (shown once).

        Raises:
            django.db.IntegrityError: ``name`` already has a live token (callers check first
                and say so; the constraint settles a race).
        """
        key = HOST_KEY_PREFIX + secrets.token_hex(20)
        # By id: the caller's user object is typed loosely (a request's user or None).
        creator = getattr(created_by, "pk", None)
        token = cls.objects.create(name=name, key_hash=hash_host_key(key), created_by_id=creator)
        return token, key
