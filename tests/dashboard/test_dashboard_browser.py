"""The experiment page in a real headless Chromium: login form, Plotly chart, live update,
and a control button (trial Pause)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.metrics import metrics_report, parse_reports
from registry.models import Experiment, State, Trial
from tests.browser import CHARTS, chart_js, log_in, save_screenshot
from tests.helpers import DASHBOARD_CONFIG, queued_experiment

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _report(trial_id: int, group: str, step: int, metrics: dict) -> None:
    payload = {"reports": [{"group": group, "steps_completed": step, "metrics": metrics}]}
    metrics_report(trial_id=trial_id, reports=parse_reports(payload))


def test_it_draws_and_live_updates_the_metrics_chart(live_server, chromium):

    user = get_user_model().objects.create_user("bob", password="pw-bob")
    experiment = Experiment.objects.create(
        owner=user, name="browser-exp", config=DASHBOARD_CONFIG, model_definition=b""
    )
    trial = Trial.objects.create(experiment=experiment, hparams={"lr": 0.01})
    for step, loss in [(10, 2.0), (20, float("nan")), (30, 1.0), (40, 0.7)]:
        _report(trial.id, "training", step, {"loss": loss})
    _report(trial.id, "validation", 40, {"validation_accuracy": 0.8, "validation_loss": 0.9})

    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/experiments/{experiment.id}/")
    # Not logged in yet: the page sends us to the login form, which comes back here.
    assert "/accounts/login/" in page.url
    save_screenshot(page, "login")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "pw-bob")
    page.click("button[type=submit]")
    page.wait_for_url(f"**/experiments/{experiment.id}/")

    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 3")
    loss = chart_js("training/loss")
    assert page.evaluate(f"{loss}.data[0].y") == [2.0, None, 1.0, 0.7]

    # New points and a new metric arrive: the poll appends the points (after_step)
    # and adds a chart for the new metric.
    _report(trial.id, "training", 50, {"loss": 0.6})
    _report(trial.id, "validation", 50, {"validation_f1": 0.75})
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 4")
    page.wait_for_function(f"{loss}.data[0].x.length === 5", timeout=20_000)
    assert page.evaluate(f"{loss}.data[0].y") == [2.0, None, 1.0, 0.7, 0.6]
    assert page.evaluate(f"{chart_js('validation/validation_f1')}.data[0].y") == [0.75]
    save_screenshot(page, "experiment-live")


def test_pause_button_pauses_the_trial(live_server, chromium):

    user = get_user_model().objects.create_user("dora", password="pw-dora")
    experiment = queued_experiment(
        owner=user,
        config_source="name: pausable\nentrypoint: python train.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n",
    )
    trial = experiment.trials.get()  # its run stays QUEUED: no worker in this test

    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "dora", "pw-dora")
    row = f"#trial-{trial.id}"
    page.wait_for_selector(f"{row} .badge.state-active")
    page.click(f"{row} button.row-menu")  # the row's controls are built on demand
    page.click(f"{row} button[data-action=pause]")
    # The form POSTs, the view redirects back: the row shows PAUSED and Activate.
    page.wait_for_selector(f"{row} .badge.state-paused", timeout=15_000)
    page.wait_for_selector(f"{row} button[data-action=activate]")
    assert page.url == f"{url}#trial-{trial.id}"  # back at the row it was posted from
    assert f"Trial {trial.id}: PAUSED" in page.inner_text(".messages")

    trial.refresh_from_db()
    assert trial.state == State.PAUSED
