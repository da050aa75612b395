"""The dashboard's trial page ``/trials/<id>/`` (Django test client, real lifecycle and metrics)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from registry import lifecycle, scheduling
from registry.metrics import metrics_report, parse_reports
from registry.models import CheckpointState, Experiment, State, Trial, TrialLog
from tests.helpers import (
    queued_experiment,
    register_checkpoint,
    register_host,
    start_run,
)

pytestmark = pytest.mark.django_db

CONFIG = (
    "name: trial-page\nentrypoint: python train.py\nmax_restarts: 0\n"
    "hyperparameters: {lr: 0.1, optimizer: {name: sgd, momentum: 0.9}}\n"
    "searcher: {name: single, metric: validation_loss, max_length: 100}\n"
)


@pytest.fixture
def experiment(alice) -> Experiment:
    return queued_experiment(
        owner=alice,
        config_source=CONFIG,
    )


@pytest.fixture
def trial(experiment: Experiment) -> Trial:
    """A trial whose run 1 runs on host ``host-a`` and reported 3 training and 2 validation metrics."""
    register_host("host-a", 1)
    scheduling.place_queued_runs()
    trial = experiment.trials.get()
    start_run(trial)
    _report(trial, [10, 20, 30], validation_steps=[20, 30])
    return trial


def _report(trial: Trial, steps: list[int], validation_steps: list[int]) -> None:
    reports = [
        {
            "group": "training",
            "steps_completed": s,
            "metrics": {"loss": 1.0 / s, "lr": 0.1, "samples_per_second": 100.0 + s},
        }
        for s in steps
    ]
    reports += [
        {
            "group": "validation",
            # validation_loss is best at step 20.
            "steps_completed": s,
            "metrics": {"validation_loss": 0.2 if s == 20 else 0.3, "validation_accuracy": s / 100},
        }
        for s in validation_steps
    ]
    metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))


def _checkpoint(trial: Trial, steps: int) -> uuid.UUID:
    return register_checkpoint(trial, steps_completed=steps, run_id=None, size=2048).uuid


def _page(client: Client, trial: Trial) -> str:
    response = client.get(reverse("dashboard:trial", args=[trial.id]))
    assert response.status_code == 200
    return response.content.decode()


def test_it_embeds_chart_options_for_every_metric(client_alice: Client, trial: Trial) -> None:
    response = client_alice.get(reverse("dashboard:trial", args=[trial.id]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'src="/static/plotly/plotly-headway.min.js"' in html and "/static/js/charts.js" in html
    assert 'id="metrics-options"' in html and 'id="metrics-board"' in html
    options = response.context["chart_options"]
    assert options["sources"] == [
        {"url": f"/api/v1/trials/{trial.id}/metrics", "trialId": trial.id}
    ]
    # Every metric of both groups (not only losses), validation first.
    assert [(m["group"], m["name"]) for m in options["metrics"]] == [
        ("validation", "validation_accuracy"),
        ("validation", "validation_loss"),
        ("training", "loss"),
        ("training", "lr"),
        ("training", "samples_per_second"),
    ]
    json.dumps(options, allow_nan=False)
    # The live poll reads the trial's REST detail.
    assert f'data-live-url="/api/v1/trials/{trial.id}"' in html
    # Header: state as text, experiment link, hparams, steps, restarts, logs link, controls.
    assert "state-active" in html and ">ACTIVE<" in html
    assert reverse("dashboard:experiment", args=[trial.experiment_id]) in html
    assert "optimizer.momentum" in html and "0.9" in html
    assert reverse("dashboard:trial-logs", args=[trial.id]) in html
    assert reverse("dashboard:trial-control", args=[trial.id, "pause"]) in html
    assert 'id="trial-error"' not in html


def test_checkpoints_table_has_validation_badges_download_and_cli(
    client_alice: Client, trial: Trial
) -> None:
    best = _checkpoint(trial, 20)
    latest = _checkpoint(trial, 30)
    plain = _checkpoint(trial, 10)
    html = _page(client_alice, trial)
    for ckpt in (best, latest, plain):
        assert f'href="/api/v1/checkpoints/{ckpt}/download"' in html
        assert f"headway checkpoint download {ckpt}" in html
    rows = {
        str(c.uuid): c
        for c in client_alice.get(reverse("dashboard:trial", args=[trial.id]))
        .context["checkpoints"]
        .rows
    }
    assert rows[str(best)].is_best and not rows[str(best)].is_latest
    assert rows[str(latest)].is_latest and not rows[str(latest)].is_best
    assert dict(rows[str(best)].validation) == {"validation_accuracy": 0.2, "validation_loss": 0.2}
    assert rows[str(plain)].validation == []
    assert "2.0\xa0KB" in html  # filesizeformat
    assert ">best<" in html and ">latest<" in html
    # Newest step first.
    assert html.index(str(latest)) < html.index(str(best)) < html.index(str(plain))


def test_runs_table_shows_host_times_and_exit_code(client_alice: Client, trial: Trial) -> None:
    lifecycle.trial_pause(trial_id=trial.id)
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=0)
    html = _page(client_alice, trial)
    assert 'id="run-1"' in html
    run_row = html[html.index('id="run-1"') :]
    run_row = run_row[: run_row.index("</tr>")]
    assert "host-a" in run_row and "exited" in run_row and "<td>0</td>" in run_row
    assert run_row.count("<time") == 2  # started and ended


def test_an_error_trial_shows_the_failed_run_at_the_top(client_alice: Client, trial: Trial) -> None:
    for i in range(60):
        TrialLog.objects.create(trial=trial, run_id=1, message=f"line {i}")
    TrialLog.objects.create(trial=trial, run_id=1, message="RuntimeError: boom")
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=3)
    trial.refresh_from_db()
    assert trial.state == State.ERROR
    html = _page(client_alice, trial)
    assert 'id="trial-error"' in html
    error = html[
        html.index('id="trial-error"') : html.index("</div>", html.index('id="trial-error"'))
    ]
    assert "<code>3</code>" in error and "RuntimeError: boom" in error
    assert "line 59" in error and "line 0\n" not in error  # only the tail
    # The error comes before the charts.
    assert html.index('id="trial-error"') < html.index('<h2 id="metrics-heading">Metrics</h2>')


def test_unknown_trial_is_404_and_anonymous_is_redirected(
    client: Client, alice, trial: Trial
) -> None:
    url = reverse("dashboard:trial", args=[trial.id])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(alice)
    assert client.get(reverse("dashboard:trial", args=[trial.id + 1000])).status_code == 404
    assert client.post(url).status_code == 405


def test_a_trial_without_metrics_or_checkpoints(
    client_alice: Client, experiment: Experiment
) -> None:
    trial = experiment.trials.get()
    html = _page(client_alice, trial)
    assert "No checkpoints yet." in html
    assert 'id="run-1"' in html and "not placed" in html


def test_the_experiment_page_links_each_trial_to_its_page(
    client_alice: Client, trial: Trial
) -> None:
    html = client_alice.get(reverse("dashboard:experiment", args=[trial.experiment_id])).content
    assert f'href="{reverse("dashboard:trial", args=[trial.id])}"' in html.decode()


def test_query_count_is_bounded(
    client_alice: Client, trial: Trial, django_assert_max_num_queries
) -> None:
    # Session, user, trial, then a fixed set per table; the large case also runs the optional
    # ones (checkpoint count past the cap, the older best checkpoint, the failed run's logs) and
    # reads long series from buckets; two for the user's workspace roles (registry.authz).
    max_queries = 16
    url = reverse("dashboard:trial", args=[trial.id])
    _checkpoint(trial, 20)
    with django_assert_max_num_queries(max_queries):
        client_alice.get(url)
    # Many more checkpoints, points and log lines, and an ERROR trial: still bounded.
    for step in range(40, 40 + 10 * 150, 10):
        _checkpoint(trial, step)
    _report(trial, list(range(40, 5000, 7)), validation_steps=list(range(40, 1540, 10)))
    for i in range(500):
        TrialLog.objects.create(trial=trial, run_id=1, message=f"line {i}")
    lifecycle.trial_run_exited(trial_id=trial.id, run_id=1, exit_code=1)  # max_restarts 0: ERROR
    assert Trial.objects.get(id=trial.id).state == State.ERROR
    with django_assert_max_num_queries(max_queries):
        response = client_alice.get(url)
    table = response.context["checkpoints"]
    assert table.total == 151 and len(table.rows) == 101  # 100 newest + the best (step 20)
    assert table.best is not None and table.best.steps_completed == 20
    assert all(c.state == CheckpointState.COMPLETED for c in table.rows)
    assert len(response.context["error"].lines) == 50


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_chromium_draws_one_chart_per_metric(live_server, chromium) -> None:
    from tests.browser import CHARTS, log_in, save_screenshot
    from tests.browser_pages import settle

    get_user_model().objects.create_user("erin", password="pw-erin")
    experiment = queued_experiment(
        owner=get_user_model().objects.get(username="erin"),
        config_source=CONFIG,
    )
    trial = experiment.trials.get()
    _report(trial, [10, 20, 30], validation_steps=[20, 30])
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, f"{live_server.url}/trials/{trial.id}/", "erin", "pw-erin")
    # Charts are drawn when scrolled near the viewport: scroll through as a person does.
    settle(page)
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 5", timeout=15_000)
    # One line per chart (the trial's); the other trace is the empty hover highlight.
    traces = page.evaluate(
        f"Array.from(document.querySelectorAll('{CHARTS}'))"
        ".map(el => el.data.filter(t => t.meta && t.meta.kind === 'line').length)"
    )
    assert traces == [1, 1, 1, 1, 1]
    keys = page.evaluate(
        f"Array.from(document.querySelectorAll('{CHARTS}')).map(el => el.dataset.key)"
    )
    assert keys[:2] == ["validation/validation_accuracy", "validation/validation_loss"]
    save_screenshot(page, "trial")
