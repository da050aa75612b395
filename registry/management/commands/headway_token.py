"""``python manage.py headway_token USERNAME [--create]``: print a user's API token."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Print USERNAME's API token (creating the token, and with --create the user)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user if missing")
        parser.add_argument("--password", help="password for a user made by --create")
        parser.add_argument("--superuser", action="store_true", help="make a created user admin")

    def handle(self, username, create, password, superuser, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user named {username!r}; pass --create to make one")
            password = password or secrets.token_urlsafe(12)
            factory = User.objects.create_superuser if superuser else User.objects.create_user
            user = factory(username=username, password=password, email="")
            self.stderr.write(f"created user {username!r} with password {password}")
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
