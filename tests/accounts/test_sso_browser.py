"""Single sign-on end to end: headless Chromium signs in to the dashboard through a real
OpenID Connect provider (``oidc-provider``'s own login and consent screens), and Headway
creates the user, links the provider account, and keeps its groups and admin flag in step; a
workspace role bound to a group follows the provider's groups claim."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from accounts.models import ExternalIdentity
from registry import workspace_roles, workspaces
from tests.browser import log_in
from tests.helpers import queued_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TINY_CONFIG = (
    "name: tiny-secret\nentrypoint: python train.py\n"
    "searcher: {name: single, metric: loss, max_length: 10}\n"
)


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


def test_a_providers_group_claim_gives_a_workspace_role_through_a_group_binding(
    live_server, chromium, oidc_provider
):
    """The one mapping of provider groups to workspace roles: a workspace admin binds a role
    to the Django group the groups claim fills (``headway workspace grant --group``). With
    ``vision`` in her claim Carol reads the private workspace; once the provider drops it, her
    next sign-in takes the role away."""
    olga = get_user_model().objects.create_user("olga")
    private = workspaces.workspace_create(owner=olga, name="vision-lab")
    workspaces.project_create(owner=olga, workspace_id=private.id, name="segmentation")
    config = TINY_CONFIG + "workspace: vision-lab\nproject: segmentation\n"
    experiment = queued_experiment(olga, config)
    # The group exists once a sign-in carried it, or an admin made it (the admin site); a
    # binding names an existing group.
    Group.objects.create(name="vision")
    workspace_roles.grant(workspace=private, actor=olga, role="viewer", group="vision")

    oidc_provider.set_groups({"carol": ["vision"]})
    page = chromium.new_page()
    page.goto(f"{live_server.url}/workspaces/")
    sign_in_at_provider(page, "carol")
    page.wait_for_url(f"{live_server.url}/workspaces/")
    assert "vision-lab" in page.inner_text("main")
    assert page.goto(f"{live_server.url}/workspaces/{private.id}/").status == 200
    assert "segmentation" in page.inner_text("main")
    assert page.goto(f"{live_server.url}/experiments/{experiment.id}/").status == 200
    assert "tiny-secret" in page.inner_text("main")
    page.goto(f"{live_server.url}/")
    assert "tiny-secret" in page.inner_text("main")
    # The REST API with the same session.
    api = f"{live_server.url}/api/v1"
    assert page.request.get(f"{api}/workspaces/{private.id}/").status == 200
    described = page.request.get(f"{api}/experiments/{experiment.id}/")
    assert described.status == 200 and described.json()["name"] == "tiny-secret"
    assert private.id in _ids(page, f"{api}/workspaces/")
    assert experiment.id in _ids(page, f"{api}/experiments/")

    # The provider takes Carol out of `vision`: at her next sign-in the role is gone.
    oidc_provider.set_groups({"carol": []})
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/workspaces/")
    sign_in_at_provider(page, "carol")
    page.wait_for_url(f"{live_server.url}/workspaces/")
    carol = get_user_model().objects.get(username="carol")
    assert not carol.groups.exists()
    assert "vision-lab" not in page.inner_text("main")
    assert page.goto(f"{live_server.url}/workspaces/{private.id}/").status == 404
    assert page.goto(f"{live_server.url}/experiments/{experiment.id}/").status == 404
    page.goto(f"{live_server.url}/")
    assert "tiny-secret" not in page.inner_text("main")
    assert page.request.get(f"{api}/workspaces/{private.id}/").status == 404
    assert page.request.get(f"{api}/experiments/{experiment.id}/").status == 404
    assert private.id not in _ids(page, f"{api}/workspaces/")
    assert experiment.id not in _ids(page, f"{api}/experiments/")


def _ids(page, url: str) -> list[int]:
    """The ids of a REST list's first page, read with the page's session."""
    answer = page.request.get(url)
    assert answer.status == 200, answer.text()
    return [row["id"] for row in answer.json()["results"]]
