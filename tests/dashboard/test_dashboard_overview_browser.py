"""The experiment overview of an 8-trial search in a real headless Chromium: charts per metric,
x-axis switch, smoothing, log scale, zoom at full resolution, legend, hparam views, the trials
table's sort and compare ticks, the compare page, the config and model-definition viewer, and
basic accessibility of every page."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from registry.metrics import XAxis, metrics_report, parse_reports, read_experiment_series
from registry.metrics._bulk import bulk_load
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
STARTED_AT = datetime(2026, 1, 1, tzinfo=UTC)


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


def _line_traces(div: str) -> str:
    """JS: the trial line traces of a chart (not its bands, raw twins or highlight)."""
    return f"{div}.data.filter(t => t.meta && t.meta.kind === 'line')"


def test_the_overview_of_a_search(live_server, chromium):

    user = get_user_model().objects.create_user("olga", password="pw-olga")
    experiment, trials = _search(user)
    best = trials[-1]  # largest validation_accuracy; larger is better
    loss = chart_js("training/loss")
    lines = _line_traces(loss)
    # What the page must draw: the same read the charts make (3 metrics x 8 trials share a
    # 30,000-point budget: 1,250 per trace; the band shape: a line with min / max).
    expected = {
        e["trial_id"]: e
        for e in read_experiment_series(
            experiment_id=experiment.id, names=["loss"], max_points=1250, band=True
        )
    }
    assert all(e["downsampled"] for e in expected.values())
    assert all(SPIKE in e["max"] for e in expected.values())

    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "olga", "pw-olga")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 3")
    page.wait_for_function(f"{lines}.length === {TRIALS}")

    # One trace per trial per metric, with the points the store returns; the spike is in the
    # band (min / max of each step range), the line goes through each range's last value.
    for key in ("validation/validation_accuracy", "validation/validation_loss"):
        traces = page.evaluate(f"{_line_traces(chart_js(key))}.map(t => t.x.length)")
        assert traces == [STEPS // VALIDATION_EVERY] * TRIALS
    drawn = page.evaluate(f"{lines}.map(t => [t.meta.trial_id, t.x, t.y])")
    for trial_id, xs, ys in drawn:
        assert xs == expected[trial_id]["steps"]
        assert ys == expected[trial_id]["values"]
    band_top = page.evaluate(
        f"Math.max(...{loss}.data.filter(t => t.meta && t.meta.kind === 'band')"
        ".flatMap(t => t.y.filter(y => y !== null)))"
    )
    assert band_top == SPIKE
    # The best trial is drawn thicker and named so; hover carries its hparams.
    widths = page.evaluate(f"{lines}.map(t => [t.meta.trial_id, t.line.width])")
    assert {tid for tid, w in widths if w == 3} == {best.id}
    assert "lr=" in page.evaluate(f"{lines}[0].meta.hp")
    assert_accessible(page)
    save_screenshot(page, "overview")

    # Zoom: the range is fetched again at full resolution (every step in it).
    page.evaluate(f"Plotly.relayout({loss}, {{'xaxis.range': [1000, 1400]}})")
    page.wait_for_function(f"{loss}.dataset.zoom === '1000-1400'")
    xs = page.evaluate(f"{lines}[0].x")
    assert xs == list(range(1000, 1401))
    page.evaluate(f"Plotly.relayout({loss}, {{'xaxis.autorange': true}})")
    page.wait_for_function(f"{lines}[0].x.length === {len(expected[trials[0].id]['steps'])}")

    # No per-chart legend on the overview: the trials table is the legend.
    assert page.evaluate(f"{loss}.layout.showlegend") is False

    # Smoothing: each line gets a faint raw twin and smoothed values.
    page.eval_on_selector(
        "#metrics-board input[name=smoothing]",
        "el => { el.value = '0.9'; el.dispatchEvent(new Event('input')); }",
    )
    raws = f"{loss}.data.filter(t => t.meta && t.meta.kind === 'raw')"
    page.wait_for_function(f"{raws}.length === {TRIALS}")
    first = trials[0].id
    raw, smooth, opacity = page.evaluate(
        f"[{raws}.find(t => t.meta.trial_id === {first}).y,"
        f" {lines}.find(t => t.meta.trial_id === {first}).y,"
        f" {raws}[0].opacity]"
    )
    assert opacity < 0.5
    assert raw == expected[first]["values"]
    assert smooth != raw and smooth[0] == pytest.approx(raw[0])  # debiased start
    page.eval_on_selector(
        "#metrics-board input[name=smoothing]",
        "el => { el.value = '0'; el.dispatchEvent(new Event('input')); }",
    )
    page.wait_for_function(f"{raws}.length === 0")

    # Log y, then the x-axis in epochs (a new read with x_axis=epochs).
    page.select_option("#metrics-board select[name=y_scale]", "log")
    page.wait_for_function(f"{loss}.layout.yaxis.type === 'log'")
    page.select_option("#metrics-board select[name=x_axis]", "epochs")
    page.wait_for_function(f"{loss}.layout.xaxis.title.text === 'epochs'")
    page.wait_for_function(f"Math.max(...{lines}[0].x) === {STEPS / STEPS_PER_EPOCH}")
    epochs_expected = read_experiment_series(
        experiment_id=experiment.id,
        names=["loss"],
        trial_ids=[trials[0].id],
        max_points=1250,
        x_axis=XAxis.EPOCHS,
        band=True,
    )[0]["epochs"]
    assert page.evaluate(f"{lines}[0].x") == epochs_expected

    # Metric picker: unticking a metric removes its chart.
    page.click("#metrics-board .metric-picker summary")
    page.uncheck("#metrics-board input[data-key='validation/validation_loss']")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 2")

    # Hyperparameter views: parallel coordinates and one scatter per varying hparam.
    page.wait_for_selector("#hparam-parcoords .js-plotly-plot, #hparam-parcoords.js-plotly-plot")
    assert (
        page.evaluate("document.querySelectorAll('#hparam-scatters .hparam-scatter').length") == 2
    )

    # The trials table sorts on the server (best validation: best first by default, then
    # reversed).
    header = "#trials th:nth-child(5) a.sort"
    rows = "Array.from(document.querySelectorAll('#trials tbody tr')).map(r => r.id)"
    assert page.evaluate(rows)[:2] == [f"trial-{best.id}", f"trial-{trials[-2].id}"]
    page.click(header)
    page.wait_for_selector("#trials th:nth-child(5)[aria-sort=descending]")
    assert page.evaluate(rows)[0] == f"trial-{trials[0].id}"
    assert page.evaluate(rows)[-1] == f"trial-{best.id}"

    # Tick two trials and compare them.
    page.check(f"#trial-{trials[0].id} input[name=trial]")
    page.check(f"#trial-{trials[1].id} input[name=trial]")
    page.click("#compare-button")
    page.wait_for_url("**/compare/?trial=*")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length === 3")
    page.wait_for_function(f"{lines}.length === 2")
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


# --- The overview at scale: 100 trials, bands, events, grouping, drawing on screen only ---

SEARCH_TRIALS = 100
SEARCH_STEPS = 3000  # training points per trial: downsampled, so drawn with a min/max band
LRS = (0.1, 0.01, 0.001, 0.0001)
# The line traces (not bands or the highlight) of a chart, as [[trial id, x, y], ...] per point
# group: per-line traces carry meta.trial_id, merged ones one customdata id per point.
LINES_JS = """((div) => {
  const out = {};
  for (const t of div.data.filter((t) => t.meta && t.meta.kind === 'line')) {
    t.x.forEach((x, i) => {
      const id = t.customdata ? t.customdata[i] : t.meta.trial_id;
      if (id === null || id === undefined) return;
      (out[id] = out[id] || {x: [], y: []}).x.push(x);
      out[id].y.push(t.y[i]);
    });
  }
  return out;
})"""
# Closed band polygons of a chart (toself fills split by null).
BANDS_JS = """((div) => div.data.filter((t) => t.meta && t.meta.kind === 'band')
  .reduce((n, t) => n + 1 + t.x.filter((x) => x === null).length, 0))"""


def _search_100(owner) -> tuple[Experiment, list[Trial]]:
    """100 trials: training loss (3,000 steps, bulk-loaded; a spike at SPIKE_STEP) and two
    validation metrics every 500 steps; hparams lr (4 values) and optimizer (2)."""
    experiment = Experiment.objects.create(
        owner=owner, name="search-100", config=DASHBOARD_CONFIG, model_definition=b""
    )
    steps = np.arange(1, SEARCH_STEPS + 1, dtype=np.int64)
    vsteps = np.arange(VALIDATION_EVERY, SEARCH_STEPS + 1, VALIDATION_EVERY, dtype=np.int64)
    trials = []
    for i in range(SEARCH_TRIALS):
        trial = Trial.objects.create(
            experiment=experiment,
            hparams={"lr": LRS[i % 4], "optimizer": "sgd" if i % 2 else "adam"},
            steps_completed=SEARCH_STEPS,
            best_validation=0.5 + i / 1000,
        )
        loss = 1.0 / steps + 0.001 * i
        loss[SPIKE_STEP - 1] = SPIKE
        bulk_load(trial.id, "training", steps, {"loss": loss}, started_at=STARTED_AT)
        bulk_load(
            trial.id,
            "validation",
            vsteps,
            {"validation_accuracy": vsteps / SEARCH_STEPS * (0.5 + i / 1000)},
            started_at=STARTED_AT,
        )
        trials.append(trial)
    return experiment, trials


def _lines(page, key: str) -> dict[int, dict]:
    return {int(k): v for k, v in page.evaluate(f"{LINES_JS}({chart_js(key)})").items()}


def test_the_overview_of_100_trials(live_server, chromium):
    user = get_user_model().objects.create_user("petra", password="pw-petra")
    experiment, trials = _search_100(user)
    ids = [t.id for t in trials]
    loss, accuracy = chart_js("training/loss"), chart_js("validation/validation_accuracy")
    # What the page reads: 2 metrics x 100 trials share 30,000 points: 150 per line.
    expected = {
        e["trial_id"]: e
        for e in read_experiment_series(
            experiment_id=experiment.id, names=["loss"], max_points=150, band=True
        )
    }
    assert all(e["downsampled"] and len(e["min"]) == len(e["steps"]) for e in expected.values())

    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "petra", "pw-petra")
    page.wait_for_function(f"{loss} && {loss}.dataset.drawnAt && {accuracy}.dataset.drawnAt")
    page.wait_for_function(f"!{loss}.dataset.rendering && !{accuracy}.dataset.rendering")

    # Every chart draws every trial, through the fast path (merged traces, no legend).
    assert page.evaluate(f"{loss}.dataset.mode") == "merged"
    assert page.evaluate(f"{loss}.layout.showlegend") is False
    drawn = _lines(page, "training/loss")
    assert sorted(drawn) == sorted(ids)
    for trial_id, line in drawn.items():
        assert line["x"] == expected[trial_id]["steps"]
        assert line["y"] == expected[trial_id]["values"]
    validation = _lines(page, "validation/validation_accuracy")
    assert sorted(validation) == sorted(ids)
    assert all(len(v["x"]) == SEARCH_STEPS // VALIDATION_EVERY for v in validation.values())
    # Downsampled series get a band (one polygon per trial) reaching the spike; the validation
    # series are whole (6 points each), so they have none.
    assert page.evaluate(f"{BANDS_JS}({loss})") == SEARCH_TRIALS
    band_top = page.evaluate(
        f"Math.max(...{loss}.data.filter(t => t.meta && t.meta.kind === 'band')"
        ".flatMap(t => t.y.filter(y => y !== null)))"
    )
    assert band_top == SPIKE
    assert max(v for v in drawn[ids[0]]["y"] if v is not None) < SPIKE  # a line, not a comb
    assert page.evaluate(f"{BANDS_JS}({accuracy})") == 0
    save_screenshot(page, "overview-100")

    # hw:trials-visible keeps only those trials; hw:trial-colors recolours.
    kept = ids[:10]
    page.evaluate(
        "ids => document.dispatchEvent(new CustomEvent('hw:trials-visible', {detail: {ids}}))",
        kept,
    )
    page.wait_for_function(f"Object.keys(({LINES_JS})({loss})).length === 10")
    assert sorted(_lines(page, "training/loss")) == kept
    page.evaluate(
        "id => document.dispatchEvent(new CustomEvent('hw:trial-colors',"
        " {detail: {colors: {[id]: '#ff0000'}, best: id}}))",
        kept[3],
    )
    page.wait_for_function(
        f"{loss}.data.some(t => t.meta && t.meta.kind === 'line' && t.line.color === '#ff0000'"
        f" && t.meta.trial_id === {kept[3]} && t.line.width === 3)"
    )

    # hw:trial-hover from the table highlights that trial's line; a chart hover emits it.
    page.evaluate(
        "id => document.dispatchEvent(new CustomEvent('hw:trial-hover',"
        " {detail: {id, source: 'trials-table'}}))",
        kept[5],
    )
    page.wait_for_function(
        f"(() => {{ const t = {loss}.data[{loss}.data.length - 1];"
        f" return t.meta.kind === 'highlight' && t.meta.trial_id === {kept[5]}"
        " && t.x.length > 0; })()"
    )
    page.evaluate(
        "() => { window.hovered = []; document.addEventListener('hw:trial-hover',"
        " e => window.hovered.push(e.detail)); }"
    )
    # The mouse over a point of the first kept trial's line (lines lie close: any kept one).
    x, y = page.evaluate(
        f"""(() => {{
          const div = {loss};
          const t = div.data.find(t => t.meta && t.meta.kind === 'line'
            && t.meta.trial_id === {kept[0]});
          const r = div.getBoundingClientRect(), xa = div._fullLayout.xaxis,
            ya = div._fullLayout.yaxis;
          return [r.left + xa._offset + xa.l2p(t.x[20]), r.top + ya._offset + ya.l2p(t.y[20])];
        }})()"""
    )
    page.mouse.move(x, y)
    page.wait_for_function("window.hovered.length > 0")
    hovered = page.evaluate("window.hovered[0]")
    assert hovered["source"] == "metric-charts" and hovered["id"] in kept

    # Grouping by a hyperparameter: one mean line (with its min-max band) per value.
    page.evaluate(
        "ids => document.dispatchEvent(new CustomEvent('hw:trials-visible', {detail: {ids}}))",
        ids,
    )
    page.select_option("#metrics-board select[name=group_by]", "lr")
    page.wait_for_function(f"{loss}.dataset.mode === 'grouped' && !{loss}.dataset.rendering")
    groups = page.evaluate(
        f"{loss}.data.filter(t => t.meta && t.meta.kind === 'line')"
        ".map(t => [t.meta.group, t.meta.trials, t.name])"
    )
    assert [(g, n) for g, n, _ in groups] == [(f"lr={lr}", 25) for lr in sorted(LRS)]
    assert page.evaluate(f"{BANDS_JS}({loss})") == 4
    assert page.evaluate(f"{loss}.layout.showlegend") is True
    assert_accessible(page)
    save_screenshot(page, "overview-100-grouped")
    page.select_option("#metrics-board select[name=group_by]", "")
    page.wait_for_function(f"{loss}.dataset.mode === 'merged'")


def test_charts_draw_only_on_screen(live_server, chromium):
    user = get_user_model().objects.create_user("quinn", password="pw-quinn")
    experiment, _ = _search(user)
    # One column of charts in a short window: the third chart starts below it.
    page = chromium.new_page(viewport={"width": 800, "height": 700})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "quinn", "pw-quinn")
    page.goto(url + "#metrics-board")
    first = chart_js("validation/validation_accuracy")
    last = chart_js("training/loss")
    page.wait_for_function(f"{first} && {first}.dataset.drawnAt")
    assert page.evaluate(f"{last}.dataset.pending") == "1"
    assert page.evaluate(f"{last}.dataset.drawnAt") is None
    # New colours (as a live update would bring data): the chart on screen redraws, the one
    # below the fold only goes stale.
    draws = int(page.evaluate(f"{first}.dataset.draws"))
    page.evaluate(
        "() => document.dispatchEvent(new CustomEvent('hw:trial-colors', {detail: {colors: {}}}))"
    )
    page.wait_for_function(f"Number({first}.dataset.draws) === {draws + 1}")
    assert page.evaluate(f"[{last}.dataset.pending, {last}.dataset.draws]") == ["1", None]
    page.evaluate(f"{last}.scrollIntoView()")
    page.wait_for_function(f"{last}.dataset.drawnAt && !{last}.dataset.pending")
    assert page.evaluate(f"{last}.dataset.draws") == "1"
    assert page.evaluate(f"{last}.data.filter(t => t.meta.kind === 'line').length") == TRIALS
