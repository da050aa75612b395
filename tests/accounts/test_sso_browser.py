"""Single sign-on end to end: headless Chromium signs in to the dashboard through a real
OpenID Connect provider (``oidc-provider``'s own login and consent screens), and Headway
creates the user, links the provider account, and keeps its groups and admin flag in step."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from accounts.models import ExternalIdentity
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def sign_in_at_provider(page, login: str) -> None:
    """From Headway's login page: the provider's button, its login form, its consent."""
    page.click("a.sso-login")
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password: the development login checks none")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    if page.locator("input[name=prompt][value=consent]").count():
        page.click("button[type=submit]")


def test_a_new_user_signs_in_gets_the_groups_and_admin_flag_and_keeps_them_in_step(
    live_server, chromium, oidc_provider
):
    oidc_provider.set_groups({"alice": ["vision", "headway-admins"]})
    page = chromium.new_page()
    page.goto(f"{live_server.url}/models/")  # an anonymous user is sent to the login page
    assert "/accounts/login/" in page.url
    assert page.locator("a.sso-login").inner_text() == "Log in with Test IdP"
    sign_in_at_provider(page, "alice")
    page.wait_for_url(f"{live_server.url}/models/")  # back where she started, signed in
    assert "alice" in page.inner_text("body")

    alice = get_user_model().objects.get(username="alice")
    assert not alice.has_usable_password()
    assert alice.email == "alice@example.test"
    assert sorted(alice.groups.values_list("name", flat=True)) == ["headway-admins", "vision"]
    assert alice.is_staff
    (identity,) = ExternalIdentity.objects.filter(user=alice)
    assert (identity.issuer, identity.subject) == (oidc_provider.issuer, "alice")

    # The provider moved her out of the admins: the next sign-in takes the flag away.
    oidc_provider.set_groups({"alice": ["nlp"]})
    page.context.clear_cookies()  # signed out of Headway and of the provider
    page.goto(f"{live_server.url}/")
    sign_in_at_provider(page, "alice")
    page.wait_for_url(f"{live_server.url}/")
    alice.refresh_from_db()
    assert list(alice.groups.values_list("name", flat=True)) == ["nlp"]
    assert not alice.is_staff
    assert ExternalIdentity.objects.filter(user=alice).count() == 1  # the same link, reused


def test_a_local_account_of_the_same_name_is_not_taken_over(live_server, chromium, oidc_provider):
    bob = get_user_model().objects.create_user("bob", password="local-password-of-bob")
    page = chromium.new_page()
    page.goto(f"{live_server.url}/")
    with page.expect_response(lambda r: "/accounts/sso/callback/" in r.url) as answer:
        sign_in_at_provider(page, "bob")
    assert answer.value.status == 403
    message = page.inner_text("[role=alert]")
    assert "a Headway account named 'bob' exists and is not linked" in message
    assert not ExternalIdentity.objects.exists()
    bob.refresh_from_db()
    assert bob.last_login is None  # not signed in as the local bob

    # Local accounts still log in with their password next to the provider's button.
    log_in(page, f"{live_server.url}/models/", "bob", "local-password-of-bob")
    assert "bob" in page.inner_text("body")
