"""``python manage.py headway_host_token NAME [--create|--revoke]``: a worker host's token.

``--create`` issues a token for host ``NAME`` and prints its key once (only its SHA-256 is
stored); ``--revoke`` revokes the live one (the host's next request is refused); neither shows
the host's tokens. The same as ``POST``/``DELETE /api/v1/host-tokens/`` and ``headway
host-token``, through ``registry.lifecycle.host_tokens``.
"""

from __future__ import annotations

import re

from django.core.management.base import BaseCommand, CommandError

from registry.errors import RegistryError
from registry.lifecycle.host_tokens import host_token_issue, host_token_revoke
from registry.models import HostToken
from registry.models.host_token import HOST_NAME_PATTERN


class Command(BaseCommand):
    help = "Issue (--create) or revoke (--revoke) worker host NAME's token, or show its tokens."

    def add_arguments(self, parser):
        parser.add_argument("name", metavar="NAME", help="the host's name (HEADWAY_HOST_NAME)")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--create", action="store_true", help="issue a token; print its key")
        action.add_argument("--revoke", action="store_true", help="revoke the live token")

    def handle(self, name: str, create: bool, revoke: bool, **options):
        if not re.fullmatch(HOST_NAME_PATTERN, name) or len(name) > 200:
            raise CommandError(
                f"invalid host name {name!r}: letters, digits, '.', '_', '-' (at most 200),"
                " starting with a letter or digit"
            )
        try:
            if create:
                _, key = host_token_issue(name, created_by=None)
                self.stderr.write(f"issued a token for host {name}; it is shown only now:")
                self.stdout.write(key)
                return
            if revoke:
                host_token_revoke(name)
                self.stdout.write(f"revoked the token of host {name}")
                return
        except RegistryError as exc:
            raise CommandError(exc.detail) from None
        tokens = HostToken.objects.filter(name=name)
        if not tokens.exists():
            raise CommandError(f"host {name} has no token; pass --create to issue one")
        for token in tokens:
            state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked else "live"
            self.stdout.write(f"{token.name}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{state}")
