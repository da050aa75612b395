"""Every dashboard page under the Content-Security-Policy, in a real headless Chromium: no
violation (no inline script anywhere), and the destructive controls still ask first
(static/js/confirm.js replaces the inline ``onsubmit`` handlers)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.metrics import metrics_report, parse_reports
from registry.models import State
from tests.browser import log_in
from tests.helpers import queued_experiment

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records CSP violations the page reports (before any of its own scripts run).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
"""


def test_every_dashboard_page_passes_the_content_security_policy(live_server, chromium):
    user = get_user_model().objects.create_user("csp", password="pw-csp")
    experiment = queued_experiment(
        owner=user,
        config_source="name: csp\nentrypoint: python train.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n",
    )
    trial = experiment.trials.get()
    reports = [
        {"group": "training", "steps_completed": s, "metrics": {"loss": 1 / s}} for s in (1, 2)
    ]
    metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))

    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=False)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    base = live_server.url
    log_in(page, f"{base}/", "csp", "pw-csp")
    pages = [
        "/",
        f"/experiments/{experiment.id}/",
        f"/experiments/{experiment.id}/files/",
        f"/trials/{trial.id}/",
        f"/trials/{trial.id}/logs/",
        f"/compare/?trials={trial.id}",
        "/models/",
        "/workers/",
        "/api/v1/schema/ui/",
    ]
    for path in pages:
        response = page.goto(f"{base}{path}")
        assert response is not None and response.ok, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_load_state("networkidle")
        violations = page.evaluate("window.__cspViolations")
        assert violations == [], (path, violations)
    blocked = [line for line in console if "Content Security Policy" in line]
    assert blocked == []

    # Kill asks first, through confirm.js: dismissing the dialog keeps the trial running.
    dialogs: list[str] = []

    def dismiss(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(f"{base}/experiments/{experiment.id}/")
    page.wait_for_load_state("networkidle")
    page.click(f"#trial-{trial.id} button.row-menu")  # the row's controls are built on demand
    page.click(f"#trial-{trial.id} button[data-action=kill]")
    for _ in range(100):  # the dialog event can trail the click on a loaded machine
        if dialogs:
            break
        page.wait_for_timeout(100)
    assert dialogs and f"trial {trial.id}" in dialogs[0].lower()
    trial.refresh_from_db()
    assert trial.state == State.ACTIVE


@pytest.mark.parametrize("mode", ["gl", "merged-gl"])
def test_scattergl_lines_draw_under_the_content_security_policy(live_server, chromium, mode):
    # The vendored bundle carries scattergl's strict variant (precompiled regl commands): the
    # charts' WebGL modes draw with no `eval` / `new Function` for the policy to block.
    user = get_user_model().objects.create_user("gl", password="pw-gl")
    experiment = queued_experiment(
        owner=user,
        config_source="name: gl\nentrypoint: python train.py\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n",
    )
    trial = experiment.trials.get()
    reports = [
        {"group": "training", "steps_completed": s, "metrics": {"loss": 1 / s}} for s in (1, 2, 3)
    ]
    metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))

    context = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=False)
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, f"{live_server.url}/", "gl", "pw-gl")
    page.goto(f"{live_server.url}/experiments/{experiment.id}/?chart_mode={mode}")
    plot = "document.querySelector('#metrics-board .plot[data-key=\"training/loss\"]')"
    drawn = f"Boolean({plot} && {plot}.dataset.drawnAt)"
    for _ in range(300):  # bounded by a count; wait_for_function would need eval
        if page.evaluate(drawn):
            break
        page.wait_for_timeout(100)
    assert page.evaluate(drawn), "the loss chart never drew"
    traces = page.evaluate(f"{plot}._fullData.map((t) => [t.type, t.visible])")
    assert ["scattergl", True] in traces, traces  # the line (a hidden scatter marks the hover)
    assert page.evaluate(f"{plot}.querySelectorAll('canvas').length") > 0
    assert page.evaluate("window.__cspViolations") == []
    assert errors == []
