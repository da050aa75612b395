"""Which provider account is which Headway user."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone


class ExternalIdentity(models.Model):
    """A user's account at an OpenID Connect provider: the provider's ``iss`` and the
    account's ``sub`` (OpenID Connect Core 1.0: the pair is the only stable identifier of
    an account; usernames and e-mail addresses change). A user has at most one per issuer.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_login_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_identity"),
            models.UniqueConstraint(fields=["user", "issuer"], name="one_identity_per_issuer"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
