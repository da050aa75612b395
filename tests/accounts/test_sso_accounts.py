"""Single sign-on without a browser: the settings' validation, the user a provider's claims
stand for, and the callback's refusals."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured

from accounts.models import ExternalIdentity
from accounts.provisioning import SignInRefused, signed_in_user
from config.sso import OIDCSettings, oidc_settings

OIDC = OIDCSettings(
    issuer="https://idp.example.test",
    client_id="c",
    client_secret="s",
    scopes="openid profile",
    username_claim="preferred_username",
    groups_claim="groups",
    admin_groups=frozenset({"admins"}),
    name="IdP",
)


@pytest.fixture
def oidc_env(monkeypatch):
    for name in ("ISSUER", "CLIENT_ID", "CLIENT_SECRET", "SCOPES", "ADMIN_GROUPS"):
        monkeypatch.delenv(f"HEADWAY_OIDC_{name}", raising=False)
    return monkeypatch


def test_no_issuer_is_no_single_sign_on(oidc_env):
    assert oidc_settings() is None


def test_settings_are_read_and_bad_ones_name_the_variable(oidc_env):
    oidc_env.setenv("HEADWAY_OIDC_ISSUER", "https://idp.example.test/realms/x")
    with pytest.raises(
        ImproperlyConfigured, match="HEADWAY_OIDC_CLIENT_ID and HEADWAY_OIDC_CLIENT_SECRET"
    ):
        oidc_settings()
    oidc_env.setenv("HEADWAY_OIDC_CLIENT_ID", "headway")
    oidc_env.setenv("HEADWAY_OIDC_CLIENT_SECRET", "secret")
    oidc_env.setenv("HEADWAY_OIDC_ADMIN_GROUPS", " ops , admins ,")
    oidc = oidc_settings()
    assert oidc is not None
    assert (
        oidc.discovery_url == "https://idp.example.test/realms/x/.well-known/openid-configuration"
    )
    assert oidc.admin_groups == {"ops", "admins"} and oidc.scopes == "openid email profile"
    oidc_env.setenv("HEADWAY_OIDC_SCOPES", "email profile")
    with pytest.raises(ImproperlyConfigured, match="HEADWAY_OIDC_SCOPES must include openid"):
        oidc_settings()
    oidc_env.setenv("HEADWAY_OIDC_ISSUER", "idp.example.test")
    with pytest.raises(ImproperlyConfigured, match="HEADWAY_OIDC_ISSUER"):
        oidc_settings()


@pytest.mark.django_db
def test_the_first_sign_in_creates_a_linked_user_and_the_next_finds_it_by_subject():
    user = signed_in_user(OIDC, {"sub": "s-1", "preferred_username": "carol", "groups": ["a"]})
    assert user.username == "carol" and not user.has_usable_password()
    # The provider renamed the account: the subject still finds the same user.
    again = signed_in_user(OIDC, {"sub": "s-1", "preferred_username": "carol2", "groups": "b"})
    assert again.pk == user.pk and again.username == "carol"
    assert list(again.groups.values_list("name", flat=True)) == ["b"]  # a string is one group
    assert ExternalIdentity.objects.get().subject == "s-1"


@pytest.mark.django_db
def test_groups_are_exactly_the_provider_s_and_the_admin_flag_follows_them():
    user = signed_in_user(
        OIDC, {"sub": "s-2", "preferred_username": "dan", "groups": ["admins", "x"]}
    )
    assert user.is_staff
    user = signed_in_user(OIDC, {"sub": "s-2", "preferred_username": "dan"})  # no claim: none
    assert not user.is_staff and not user.groups.exists()
    assert set(Group.objects.values_list("name", flat=True)) == {"admins", "x"}  # kept for roles
    plain = OIDCSettings(**{**OIDC.__dict__, "admin_groups": frozenset()})
    get_user_model().objects.filter(pk=user.pk).update(is_staff=True)
    assert signed_in_user(plain, {"sub": "s-2", "groups": []}).is_staff  # not SSO's to change


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"preferred_username": "x"}, "no subject"),
        ({"sub": "s"}, "no 'preferred_username' claim"),
        ({"sub": "s", "preferred_username": "a b"}, "not a valid username"),
        ({"sub": "s", "preferred_username": "x" * 151}, "over 150"),
        ({"sub": "s", "preferred_username": "e", "groups": {"a": 1}}, "not a list of names"),
        ({"sub": "s", "preferred_username": "e", "groups": [""]}, "empty or over 150"),
    ],
)
def test_claims_that_cannot_make_a_user_are_refused_with_the_reason(claims, why):
    with pytest.raises(SignInRefused, match=why):
        signed_in_user(OIDC, claims)
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_a_deactivated_user_and_a_taken_username_are_refused():
    get_user_model().objects.create_user("Erin", password="pw")
    with pytest.raises(SignInRefused, match="account named 'erin' exists"):
        signed_in_user(OIDC, {"sub": "s-3", "preferred_username": "erin"})
    user = signed_in_user(OIDC, {"sub": "s-4", "preferred_username": "frank"})
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(SignInRefused, match="deactivated"):
        signed_in_user(OIDC, {"sub": "s-4", "preferred_username": "frank"})


@pytest.mark.django_db
def test_without_a_provider_there_is_no_button_and_the_legs_are_404(client, settings):
    settings.HEADWAY_OIDC = None
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"sso-login" not in page.content
    assert client.get("/accounts/sso/login/").status_code == 404
    assert client.get("/accounts/sso/callback/?code=x&state=y").status_code == 404


@pytest.mark.django_db
def test_a_callback_the_session_never_asked_for_is_refused(client, settings):
    settings.HEADWAY_OIDC = OIDC
    page = client.get("/accounts/sso/callback/?code=x&state=forged")
    assert page.status_code == 400
    assert b"Single sign-on: the sign-on provider&#x27;s answer was refused" in page.content
    denied = client.get("/accounts/sso/callback/?error=access_denied&error_description=no")
    assert denied.status_code == 400 and b"refused: no" in denied.content
    assert "_auth_user_id" not in client.session
