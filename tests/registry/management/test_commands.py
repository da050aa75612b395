"""Management commands: ``headway_token``."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def test_headway_token_prints_the_users_token_and_creates_users_on_request():
    with pytest.raises(CommandError, match="--create"):
        call_command("headway_token", "bob")
    out, err = io.StringIO(), io.StringIO()
    call_command("headway_token", "bob", "--create", stdout=out, stderr=err)
    token = out.getvalue().strip()
    assert Token.objects.get(user__username="bob").key == token
    assert "created user 'bob'" in err.getvalue()
    again = io.StringIO()
    call_command("headway_token", "bob", stdout=again)
    assert again.getvalue().strip() == token
    call_command(
        "headway_token", "root", "--create", "--superuser", "--password", "pw", stdout=io.StringIO()
    )
    root = get_user_model().objects.get(username="root")
    assert root.is_superuser and root.check_password("pw")
