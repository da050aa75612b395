"""The experiment overview of an 8-trial search in a real headless Chromium: charts per metric,
x-axis switch, smoothing, log scale, zoom at full resolution, legend, hparam views, the trials
table's sort and compare ticks, the compare page, the config and model-definition viewer, and
basic accessibility of every page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.metrics import XAxis, metrics_report, parse_reports, read_experiment_series
from registry.models import Experiment, Trial
from tests.browser import CHARTS, assert_accessible, chart_js, log_in, save_screenshot
from tests.helpers import DASHBOARD_CONFIG, make_tar_gz

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIALS = 8
STEPS = 3000  # training points per trial: more than one chart trace holds, so downsampled
STEPS_PER_EPOCH = 1000
VALIDATION_EVERY = 500
SPIKE_STEP = 1777
SPIKE = 50.0


def _search(owner) -> tuple[Experiment, list[Trial]]:
    config = {
        **DASHBOARD_CONFIG,
        "searcher": {**DASHBOARD_CONFIG["searcher"], "name": "random", "max_trials": TRIALS},
    }
    experiment = Experiment.objects.create(
        owner=owner,
        name="search-8",
        config=config,
        original_config="name: search-8\nsearcher: {name: random, max_trials: 8}\n",
        model_definition=make_tar_gz(
            {"model_def.py": "class T:\n    pass\n", "data/x.bin": "\0\1"}
        ),
    )
    trials = []
    for i in range(TRIALS):
        lr = 10 ** -(1 + i % 4)
        accuracy = 0.5 + 0.05 * i
        trial = Trial.objects.create(
            experiment=experiment,
            hparams={"lr": lr, "optimizer": "sgd" if i % 2 else "adam"},
            steps_completed=STEPS,
            best_validation=accuracy,
        )
        reports = [
            {
                "group": "training",
                "steps_completed": step,
                "epoch": step / STEPS_PER_EPOCH,
                "metrics": {"loss": SPIKE if step == SPIKE_STEP else 1.0 / step + 0.01 * i},
            }
            for step in range(1, STEPS + 1)
        ]
        reports += [
            {
                "group": "validation",
                "steps_completed": step,
                "epoch": step / STEPS_PER_EPOCH,
                "metrics": {"validation_accuracy": accuracy * step / STEPS, "validation_loss": 1.0},
            }
            for step in range(VALIDATION_EVERY, STEPS + 1, VALIDATION_EVERY)
        ]
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
        trials.append(trial)
    return experiment, trials


def test_the_overview_of_a_search(live_server, chromium):

    user = get_user_model().objects.create_user("olga", password="pw-olga")
    experiment, trials = _search(user)
    best = trials[-1]  # largest validation_accuracy; larger is better
    loss = chart_js("training/loss")
    # What the page must draw: the same read the charts make (3 metrics x 8 trials share a
    # 30,000-point budget: 1,250 per trace).
    expected = {
        e["trial_id"]: e
        for e in read_experiment_series(
            experiment_id=experiment.id, names=["loss"], max_points=1250
        )
    }
    assert all(e["downsampled"] for e in expected.values())

    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "olga", "pw-olga")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 3")
    page.wait_for_function(f"{loss}.data.length === {TRIALS}")

    # One trace per trial per metric, with the points the store returns (spike kept).
    for key in ("validation/validation_accuracy", "validation/validation_loss"):
        traces = page.evaluate(f"{chart_js(key)}.data.map(t => t.x.length)")
        assert traces == [STEPS // VALIDATION_EVERY] * TRIALS
    drawn = page.evaluate(f"{loss}.data.map(t => [t.meta.trial_id, t.x, t.y])")
    for trial_id, xs, ys in drawn:
        assert xs == expected[trial_id]["steps"]
        assert ys == expected[trial_id]["values"]
        assert max(ys) == SPIKE
    # The best trial is drawn thicker and named so; hover carries its hparams.
    widths = page.evaluate(f"{loss}.data.map(t => [t.meta.trial_id, t.line.width])")
    assert {tid for tid, w in widths if w == 3} == {best.id}
    assert "lr=" in page.evaluate(f"{loss}.data[0].meta.hp")
    assert_accessible(page)
    save_screenshot(page, "overview")

    # Zoom: the range is fetched again at full resolution (every step in it).
    page.evaluate(f"Plotly.relayout({loss}, {{'xaxis.range': [1000, 1400]}})")
    page.wait_for_function(f"{loss}.dataset.zoom === '1000-1400'")
    xs = page.evaluate(f"{loss}.data[0].x")
    assert xs == list(range(1000, 1401))
    page.evaluate(f"Plotly.relayout({loss}, {{'xaxis.autorange': true}})")
    page.wait_for_function(f"{loss}.data[0].x.length === {len(expected[trials[0].id]['steps'])}")

    # Legend: clicking one entry hides that trial's line in that chart only.
    page.locator("#metrics-board .plot[data-key='training/loss'] .legend .traces").first.click()
    page.wait_for_function(f"{loss}.data[0].visible === 'legendonly'")
    assert page.evaluate(f"{loss}.data.filter(t => t.visible === 'legendonly').length") == 1
    other = chart_js("validation/validation_loss")
    assert page.evaluate(f"{other}.data.filter(t => t.visible === 'legendonly').length") == 0

    # Smoothing: each line gets a faint raw twin and smoothed values.
    page.eval_on_selector(
        "#metrics-board input[name=smoothing]",
        "el => { el.value = '0.9'; el.dispatchEvent(new Event('input')); }",
    )
    page.wait_for_function(f"{loss}.data.length === {2 * TRIALS}")
    raw, smooth = page.evaluate(f"[{loss}.data[0].y, {loss}.data[1].y]")
    assert page.evaluate(f"{loss}.data[0].opacity") < 0.5
    assert raw == expected[trials[0].id]["values"]
    assert smooth != raw and smooth[0] == pytest.approx(raw[0])  # debiased start
    page.eval_on_selector(
        "#metrics-board input[name=smoothing]",
        "el => { el.value = '0'; el.dispatchEvent(new Event('input')); }",
    )
    page.wait_for_function(f"{loss}.data.length === {TRIALS}")

    # Log y, then the x-axis in epochs (a new read with x_axis=epochs).
    page.select_option("#metrics-board select[name=y_scale]", "log")
    page.wait_for_function(f"{loss}.layout.yaxis.type === 'log'")
    page.select_option("#metrics-board select[name=x_axis]", "epochs")
    page.wait_for_function(f"{loss}.layout.xaxis.title.text === 'epochs'")
    page.wait_for_function(f"Math.max(...{loss}.data[0].x) === {STEPS / STEPS_PER_EPOCH}")
    epochs_expected = read_experiment_series(
        experiment_id=experiment.id,
        names=["loss"],
        trial_ids=[trials[0].id],
        max_points=1250,
        x_axis=XAxis.EPOCHS,
    )[0]["epochs"]
    assert page.evaluate(f"{loss}.data[0].x") == epochs_expected

    # Metric picker: unticking a metric removes its chart.
    page.click("#metrics-board .metric-picker summary")
    page.uncheck("#metrics-board input[data-key='validation/validation_loss']")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 2")

    # Hyperparameter views: parallel coordinates and one scatter per varying hparam.
    page.wait_for_selector("#hparam-parcoords .js-plotly-plot, #hparam-parcoords.js-plotly-plot")
    assert (
        page.evaluate("document.querySelectorAll('#hparam-scatters .hparam-scatter').length") == 2
    )

    # The trials table sorts by a column (best validation, then reversed).
    header = "#trials th:nth-child(7) button.sort"
    page.click(header)
    first = page.evaluate("document.querySelector('#trials tbody tr').id")
    assert first == f"trial-{trials[0].id}"
    page.click(header)
    first = page.evaluate("document.querySelector('#trials tbody tr').id")
    assert first == f"trial-{best.id}"
    assert page.get_attribute("#trials th:nth-child(7)", "aria-sort") == "descending"

    # Tick two trials and compare them.
    page.check(f"#trial-{trials[0].id} input[name=trial]")
    page.check(f"#trial-{trials[1].id} input[name=trial]")
    page.click("#compare-button")
    page.wait_for_url("**/compare/?trial=*")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 3")
    page.wait_for_function(f"{loss}.data.length === 2")
    differs = page.evaluate(
        "Array.from(document.querySelectorAll('.hparam-diff tr.diff-row td:first-child'))"
        ".map(td => td.textContent.trim())"
    )
    assert differs == ["lr", "optimizer"]
    assert_accessible(page)
    save_screenshot(page, "compare")

    # Config and model definition viewer.
    page.goto(url)
    assert "random" in page.inner_text("#config-effective")
    page.click("text=Model definition files")
    page.click("text=model_def.py")
    assert "class T:" in page.inner_text(".file-view")
    assert_accessible(page)
    save_screenshot(page, "model-files")

    # The list filters by name and sorts by a column.
    other = Experiment.objects.create(
        owner=user, name="zz-other", config=DASHBOARD_CONFIG, model_definition=b""
    )
    page.goto(f"{live_server.url}/")
    rows = "table.experiments tbody tr"
    assert page.locator(rows).count() == 2
    page.fill("form.list-filters input[name=name]", "search")
    page.click("form.list-filters button[type=submit]")
    page.wait_for_url("**/?*name=search*")
    assert page.locator(rows).count() == 1
    page.goto(f"{live_server.url}/")
    page.click("table.experiments th a:text-is('Name')")
    page.wait_for_url("**/?sort=name")
    assert page.get_attribute(f"{rows} >> nth=0", "data-experiment") == str(experiment.id)
    page.click("table.experiments th a:has-text('Name')")
    page.wait_for_url("**/?sort=-name")
    assert page.get_attribute(f"{rows} >> nth=0", "data-experiment") == str(other.id)

    # The list refreshes states and progress by itself.
    page.goto(f"{live_server.url}/")
    row = f"tr[data-experiment='{experiment.id}']"
    assert page.inner_text(f"{row} [data-field=state]") == "ACTIVE"
    Experiment.objects.filter(id=experiment.id).update(state="PAUSED", progress=0.5)
    page.wait_for_selector(f"{row} [data-field=state] .badge.state-paused", timeout=15_000)
    assert page.inner_text(f"{row} .progress-label") == "50%"
    assert_accessible(page)
    save_screenshot(page, "experiments")
    page.goto(f"{live_server.url}/workers/")
    assert_accessible(page)
    save_screenshot(page, "workers")
