"""The trial page's lineage and system metrics: a continued trial links to its
parent and back, its charts draw the parent's curve dashed, and the ``system`` group gets a board
of its own (Django test client and headless Chromium, real lifecycle and metric store)."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from registry import lifecycle, scheduling
from registry.metrics import metrics_report, parse_reports
from registry.models import Trial
from tests.helpers import queued_experiment, register_checkpoint, register_host, start_run

CONFIG = (
    "name: lineage\nentrypoint: python train.py\nmax_restarts: 0\n"
    "hyperparameters: {lr: 0.1}\n"
    "searcher: {name: single, metric: validation_loss, max_length: 100}\n"
)


def _report(trial: Trial, group: str, metrics_at: dict[int, dict]) -> None:
    reports = [{"group": group, "steps_completed": s, "metrics": m} for s, m in metrics_at.items()]
    metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))


def _run_and_continue(owner) -> tuple[Trial, Trial]:
    """A parent trial that trained and checkpointed, and the trial continued from it."""
    register_host("host-a", 1)
    experiment = queued_experiment(owner=owner, config_source=CONFIG)
    scheduling.place_queued_runs()
    parent = experiment.trials.get()
    run = start_run(parent)
    _report(parent, "training", {s: {"loss": 1.0 / s} for s in (10, 20, 30)})
    register_checkpoint(parent, steps_completed=30, run_id=run.run_id)
    lifecycle.trial_run_exited(trial_id=parent.id, run_id=run.run_id, exit_code=0)
    continued = lifecycle.trial_continue(trial_id=parent.id, owner=owner)
    scheduling.place_queued_runs()
    child = continued.trials.get()
    start_run(child)
    _report(child, "training", {s: {"loss": 0.05 / s} for s in (10, 20)})
    _report(
        child,
        "system",
        {s: {"cpu_util_percent": 10.0 + s, "process_rss_mib": 300.0} for s in (10, 20)},
    )
    return parent, child


def _options(html: str, name: str) -> dict:
    match = re.search(rf'<script id="{name}" type="application/json">(.*?)</script>', html, re.S)
    assert match, name
    return json.loads(match.group(1))


@pytest.mark.django_db
def test_both_links_and_the_chart_options(client_alice, alice) -> None:
    parent, child = _run_and_continue(alice)
    parent_page = client_alice.get(reverse("dashboard:trial", args=[parent.id])).content.decode()
    child_page = client_alice.get(reverse("dashboard:trial", args=[child.id])).content.decode()

    assert 'id="lineage-children"' in parent_page
    assert f'href="{reverse("dashboard:trial", args=[child.id])}"' in parent_page
    assert 'id="lineage-parent"' not in parent_page
    assert 'id="lineage-parent"' in child_page
    assert f'href="{reverse("dashboard:trial", args=[parent.id])}"' in child_page

    options = _options(child_page, "metrics-options")
    assert options["parentTrialId"] == parent.id
    assert [s["trialId"] for s in options["sources"]] == [child.id, parent.id]
    assert {"group": "system", "name": "cpu_util_percent"} not in options["metrics"]
    system = _options(child_page, "system-options")
    assert {m["group"] for m in system["metrics"]} == {"system"}
    assert system["xAxis"] == "time"
    # The parent reported no system metrics: a hint instead of an empty board.
    assert 'id="system-empty"' in parent_page and "parentTrialId" not in _options(
        parent_page, "metrics-options"
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_parent_curve_is_dashed_and_system_metrics_are_charted(live_server, chromium) -> None:
    from django.contrib.auth import get_user_model

    from tests.browser import chart_js, log_in, save_screenshot

    owner = get_user_model().objects.create_user("petra", password="pw-petra")
    parent, child = _run_and_continue(owner)
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    url = f"{live_server.url}/trials/{child.id}/"
    log_in(page, url, "petra", "pw-petra")

    loss = chart_js("training/loss")
    page.wait_for_function(f"{loss} && {loss}.data && {loss}.data.length >= 2", timeout=20_000)
    page.wait_for_function(
        f"{loss}.data.some(t => t.meta && t.meta.trial_id === {parent.id}"
        " && t.line && t.line.dash === 'dash')",
        timeout=20_000,
    )
    traces = page.evaluate(
        f"{loss}.data.map(t => [t.meta && t.meta.trial_id, (t.line || {{}}).dash || 'solid',"
        " t.x.length])"
    )
    assert [parent.id, "dash", 3] in traces  # the parent's three points, dashed
    assert [child.id, "solid", 2] in traces

    cpu = "document.querySelector('#system-board .plot[data-key=\"system/cpu_util_percent\"]')"
    page.locator("#system-board").scroll_into_view_if_needed()
    page.wait_for_function(f"{cpu} && {cpu}.data && {cpu}.data.length >= 1", timeout=20_000)
    assert page.evaluate(f"{cpu}.data[0].y.filter(v => v !== null).length") == 2
    assert page.eval_on_selector("#system-board select[name=x_axis]", "s => s.value") == "time"
    save_screenshot(page, "trial-lineage-system")
