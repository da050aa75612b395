"""The experiment page's live polling in headless Chromium: a lost connection and an expired
session show #live-banner instead of a silently stale page; Cancel asks first."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.models import State
from tests.browser import log_in
from tests.helpers import queued_experiment

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BANNER = "#live-banner"


def test_banner_on_lost_connection_and_expired_session(live_server, chromium):

    user = get_user_model().objects.create_user("erin", password="pw-erin")
    experiment = queued_experiment(
        owner=user,
        config_source="name: banner\nentrypoint: python train.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n",
    )
    trial = experiment.trials.get()  # its run stays QUEUED: the page keeps polling

    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "erin", "pw-erin")
    assert page.is_hidden(BANNER)

    # Cancel asks first; dismissing the dialog posts nothing.
    dialogs: list[str] = []

    def dismiss(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.click(f"#trial-{trial.id} button.row-menu")  # the row's controls are built on demand
    page.click(f"#trial-{trial.id} button[data-action=cancel]")
    assert dialogs and dialogs[0].startswith(f"Cancel trial {trial.id}?")
    page.remove_listener("dialog", dismiss)
    trial.refresh_from_db()
    assert trial.state == State.ACTIVE

    # The live endpoint unreachable: "Connection lost", gone once it answers again.
    page.route("**/live?*", lambda route: route.abort("internetdisconnected"))
    page.wait_for_selector(f"{BANNER}[data-kind=connection]:visible", timeout=15_000)
    assert "Connection lost, retrying" in page.inner_text(BANNER)
    page.unroute("**/live?*")
    page.wait_for_selector(BANNER, state="hidden", timeout=40_000)

    # Logged out elsewhere: the poll lands on the login page -> log-in banner and link.
    context.clear_cookies()
    page.wait_for_selector(f"{BANNER}[data-kind=session]:visible", timeout=40_000)
    assert "Your session expired" in page.inner_text(BANNER)
    href = page.get_attribute(f"{BANNER} a", "href")
    assert href == f"/accounts/login/?next=%2Fexperiments%2F{experiment.id}%2F"
