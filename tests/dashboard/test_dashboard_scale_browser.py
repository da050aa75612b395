"""The experiment page at search scale, in a real headless Chromium (1440 px wide), on a finished
60-trial random search (``tests/helpers_hparams.hparam_search``) with system metrics on two
trials (the server side of the table, its sort and its CSV: ``test_dashboard_trials_table.py``):
the table pages on the server (50 rows, the rest on page 2), lines of many trials merge
into a few traces that still hold every trial's points, plain lines without markers (a point
with no neighbour alone gets a dot), parallel
coordinates coloured on the searcher metric's scale, system metrics in a collapsed section, the
count right after *Hide all*, the CSV export, select-all across pages, deferred scripts and whole
words in the table's cells. Every wait is on a DOM signal the page sets (``data-drawn``), never
on a clock.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.metrics import metrics_report, parse_reports
from tests.browser import log_in, save_screenshot
from tests.helpers_hparams import search_with_system_metrics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIALS = 60
ROWS = "#trials tbody tr"

# Per chart: its line traces (mode, trial ids of the points, non-null points).
TRACES_JS = """() => Array.from(document.querySelectorAll('#metrics-board .plot')).map((div) => {
  const lines = div.data.filter((t) => t.meta && t.meta.kind === 'line');
  return {
    key: div.dataset.key,
    modes: lines.map((t) => t.mode),
    markers: lines.filter((t) => t.marker && t.marker.size).length,
    ids: [...new Set(lines.flatMap((t) => (t.customdata || []).filter((v) => v !== null)))],
    points: lines.reduce((n, t) => n + t.y.filter((v) => v !== null).length, 0),
    traces: lines.length,
  };
})"""


def _row_ids(page) -> list[int]:
    return page.evaluate(
        f"Array.from(document.querySelectorAll('{ROWS}')).map(r => Number(r.dataset.trial))"
    )


def test_charts_and_table_hold_up_at_scale(live_server, chromium):
    user = get_user_model().objects.create_user("kim", password="pw-kim")
    experiment, trials = search_with_system_metrics(user)
    all_ids = sorted(t.id for t in trials)
    # One trial reports a metric once: a point with no neighbour gets a dot of its own.
    single = [{"group": "validation", "steps_completed": 100, "metrics": {"f1": 0.5}}]
    metrics_report(trial_id=trials[0].id, reports=parse_reports({"reports": single}))
    page = chromium.new_page(viewport={"width": 1440, "height": 3000})
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "kim", "pw-kim")
    page.wait_for_selector("#metrics-board[data-drawn]", state="attached")

    # Every page script is deferred: the data fetches do not wait for Plotly.
    blocking = page.evaluate(
        "Array.from(document.querySelectorAll('body script[src]')).filter(s => !s.defer).length"
    )
    assert blocking == 0

    # The table: 50 rows, the rest on the next page (fetched in place).
    first = _row_ids(page)
    assert len(first) == 50
    page.click(".trials-pager .pager-next")
    page.wait_for_function(
        "(id) => Number(document.querySelector('#trials tbody tr').dataset.trial) !== id",
        arg=first[0],
    )
    assert sorted(first + _row_ids(page)) == all_ids
    assert "page=2" in page.url

    # Charts: the validation metrics only (system ones are apart), merged lines, every trial's
    # points, plain lines.
    charts = {c["key"]: c for c in page.evaluate(TRACES_JS)}
    assert sorted(charts) == [
        "validation/f1",
        "validation/validation_accuracy",
        "validation/validation_loss",
    ]
    dots = page.evaluate(
        "document.querySelector('#metrics-board .plot[data-key=\"validation/f1\"]').data"
        ".filter(t => t.meta && t.meta.kind === 'isolated')"
        ".map(t => ({mode: t.mode, ids: t.customdata, y: t.y}))"
    )
    assert dots == [{"mode": "markers", "ids": [trials[0].id], "y": [0.5]}]
    for chart in (charts[k] for k in sorted(charts) if k != "validation/f1"):
        assert chart["traces"] <= 11  # 10 palette colours (+ the best trial's thick line)
        assert set(chart["modes"]) == {"lines"} and chart["markers"] == 0
        assert sorted(chart["ids"]) == all_ids
        assert chart["points"] == 2 * TRIALS  # two reports per trial, none lost in merging

    # Parallel coordinates: one trace coloured by the metric on a scale with a colour bar.
    page.wait_for_function("document.getElementById('hparam-parcoords').data !== undefined")
    line = page.evaluate("document.getElementById('hparam-parcoords').data[0].line")
    assert line["colorscale"] == "Viridis" and line["showscale"] is True
    assert line["reversescale"] is True  # validation_accuracy: larger is better
    values = sorted(t.best_validation for t in trials)
    assert sorted(line["color"]) == pytest.approx(values)

    # System metrics: collapsed, no chart until opened; then drawn.
    assert page.evaluate("document.getElementById('system-metrics').open") is False
    assert page.evaluate("document.querySelectorAll('#system-board .plot').length") == 0
    page.click("#system-metrics > summary")
    page.wait_for_selector("#system-board[data-drawn]", state="attached")
    keys = page.evaluate(
        "Array.from(document.querySelectorAll('#system-board .plot')).map(d => d.dataset.key)"
    )
    assert keys == ["system/cpu_util"]

    # The count follows Hide all / Show all at once.
    count = ".legend-count"
    page.click(".legend-hide-all")
    assert page.inner_text(count) == f"0 of {TRIALS} trials in the charts"
    page.click(".legend-show-all")
    assert page.inner_text(count) == f"{TRIALS} of {TRIALS} trials in the charts"

    # Select all: every matching trial on every page, then only those a search keeps.
    page.check("input.select-all")
    assert page.inner_text(".selected-count") == f"{TRIALS} selected"
    assert page.evaluate("TrialsTable.selectedIds()") == all_ids
    page.uncheck("input.select-all")
    assert page.inner_text(".selected-count") == "0 selected"
    adam = sorted(t.id for t in trials if t.hparams["optimizer"] == "adam")
    page.fill(".legend-search", "optimizer=adam")
    page.wait_for_function(
        "(n) => document.querySelector('.legend-count').textContent.startsWith(n + ' ')",
        arg=len(adam),
    )
    page.check("input.select-all")
    assert page.evaluate("TrialsTable.selectedIds()") == adam
    # The compare form carries the selected trials of other pages as hidden fields.
    page.evaluate(
        "document.getElementById('compare-form').addEventListener('submit', e => e.preventDefault())"
    )
    page.click("#compare-button")
    sent = page.evaluate(
        "Array.from(new FormData(document.getElementById('compare-form')).getAll('trial'))"
        ".map(Number).sort((a, b) => a - b)"
    )
    assert sent == adam

    # Whole words at 1440 px: each state badge and number sits on one line.
    broken = page.evaluate(
        """() => Array.from(document.querySelectorAll('#trials td .badge, #trials td .num'))
          .filter((el) => {
            const range = document.createRange();
            range.selectNodeContents(el);
            const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
            return tops.size > 1;
          }).map((el) => el.textContent)"""
    )
    assert broken == []
    save_screenshot(page, "dashboard-scale-60")
