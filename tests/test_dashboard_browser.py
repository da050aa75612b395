"""The experiment page in a real headless Chromium: login form, Plotly chart, live update,
and a control button (trial Pause)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from registry.lifecycle import experiment_create
from registry.metrics import metrics_report, parse_reports
from registry.models import Experiment, State, Trial
from tests.helpers import DASHBOARD_CONFIG, make_tar_gz

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TRACE_COUNT = "document.getElementById('metrics-chart').data.length"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is not installed"
    # A green CI run must never hide a capability it skipped.
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _report(trial_id: int, group: str, step: int, metrics: dict) -> None:
    payload = {"reports": [{"group": group, "steps_completed": step, "metrics": metrics}]}
    metrics_report(trial_id=trial_id, reports=parse_reports(payload))


def test_it_draws_and_live_updates_the_metrics_chart(live_server, tmp_path, monkeypatch):
    _require_chromium()
    # Playwright's sync API runs an asyncio loop in this thread, which trips Django's async
    # guard on ORM calls; the ORM writes below are plain synchronous code, so that is safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    user = get_user_model().objects.create_user("bob", password="pw-bob")
    experiment = Experiment.objects.create(
        owner=user, name="browser-exp", config=DASHBOARD_CONFIG, model_definition=b""
    )
    trial = Trial.objects.create(experiment=experiment, hparams={"lr": 0.01})
    for step, loss in [(10, 2.0), (20, float("nan")), (30, 1.0), (40, 0.7)]:
        _report(trial.id, "training", step, {"loss": loss})
    _report(trial.id, "validation", 40, {"validation_accuracy": 0.8, "validation_loss": 0.9})

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{live_server.url}/experiments/{experiment.id}/")
            # Not logged in yet: the page sends us to the login form, which comes back here.
            assert "/accounts/login/" in page.url
            page.fill("input[name=username]", "bob")
            page.fill("input[name=password]", "pw-bob")
            page.click("button[type=submit]")
            page.wait_for_url(f"**/experiments/{experiment.id}/")

            page.wait_for_selector("#metrics-chart.js-plotly-plot .main-svg", timeout=15_000)
            page.wait_for_function(f"{TRACE_COUNT} === 3", timeout=15_000)
            ys = page.evaluate(
                "document.getElementById('metrics-chart').data"
                ".find(t => t.name.endsWith('training/loss')).y"
            )
            assert ys == [2.0, None, 1.0, 0.7]

            # A new validation metric arrives: the page's polling redraws with a 4th trace.
            _report(trial.id, "validation", 50, {"validation_f1": 0.75})
            page.wait_for_function(f"{TRACE_COUNT} === 4", timeout=20_000)

            shot = tmp_path / "experiment.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    data = shot.read_bytes()
    assert len(data) > 1000
    assert data[:8] == b"\x89PNG\r\n\x1a\n"


def _log_in(page, url: str, username: str, password: str) -> None:
    """Open ``url``, which sends an anonymous user to the login form, and log in."""
    page.goto(url)
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(url)


def test_pause_button_pauses_the_trial(live_server, monkeypatch):
    _require_chromium()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    user = get_user_model().objects.create_user("dora", password="pw-dora")
    experiment = experiment_create(
        owner=user,
        config_source="name: pausable\nentrypoint: python train.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n",
        model_definition=make_tar_gz({"train.py": "print('hi')\n"}),
    )
    trial = experiment.trials.get()  # its run stays QUEUED: no worker in this test

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            url = f"{live_server.url}/experiments/{experiment.id}/"
            _log_in(page, url, "dora", "pw-dora")
            row = f"#trial-{trial.id}"
            page.wait_for_selector(f"{row} .badge.state-active")
            page.click(f"{row} button[data-action=pause]")
            # The form POSTs, the view redirects back: the row shows PAUSED and Activate.
            page.wait_for_selector(f"{row} .badge.state-paused", timeout=15_000)
            page.wait_for_selector(f"{row} button[data-action=activate]")
            assert page.url == f"{url}#trial-{trial.id}"  # back at the row it was posted from
            assert f"Trial {trial.id}: PAUSED" in page.inner_text(".messages")
        finally:
            browser.close()

    trial.refresh_from_db()
    assert trial.state == State.PAUSED
