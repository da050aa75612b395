"""The charts follow the trials table's filter box, in a real headless Chromium, on a finished
60-trial random search: with a filter, the metric charts, the parallel coordinates and the
hyperparameter scatters draw only the matching trials (on every page of the table, not just the
rows shown), the legend's count says so, a new filter (a page load, or a table swapped in place)
redraws them, *Top N* ranks the matching trials, and a malformed filter leaves every trial in the charts. Every wait is on what the
page draws, never on a clock."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.browser import log_in, save_screenshot
from tests.helpers_hparams import hparam_search

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ADAM = 'hparams.optimizer = "adam"'
ADAM_LOW_DROPOUT = 'hparams.optimizer = "adam" and hparams.dropout < 0.3'
# The trial ids a chart draws, as {chart key: sorted ids}: merged line traces carry one
# customdata id per point, per-trial ones meta.trial_id.
CHART_IDS_JS = """() => Object.fromEntries(
  Array.from(document.querySelectorAll('#metrics-board .plot')).map((div) => {
    const ids = new Set();
    for (const t of (div.data || []).filter((t) => t.meta && t.meta.kind === 'line')) {
      if (t.customdata) t.customdata.forEach((id) => { if (id !== null) ids.add(id); });
      else if (t.meta.trial_id !== undefined) ids.add(t.meta.trial_id);
    }
    return [div.dataset.key, [...ids].sort((a, b) => a - b)];
  }))"""
PARCOORDS = "document.getElementById('hparam-parcoords')"
SCATTERS = "Array.from(document.querySelectorAll('#hparam-scatters .hparam-scatter'))"


def _wait_drawn(page, ids: list[int], total: int) -> None:
    """Wait until the count, every metric chart, the parallel coordinates and every scatter
    show exactly ``ids`` (of ``total`` trials). The metric charts draw only on screen: the page
    scrolls up to them (a filter's page load lands on the table)."""
    page.evaluate("window.scrollTo(0, 0)")
    count = f"{len(ids)} of {total} trials in the charts"
    page.wait_for_function(
        "(c) => document.querySelector('.legend-count').textContent === c", arg=count
    )
    page.wait_for_function(
        f"(ids) => {{ const charts = Object.values(({CHART_IDS_JS})()); "
        "return charts.length > 0 && charts.every((c) => JSON.stringify(c) === ids); }",
        arg=str(ids).replace(" ", ""),
    )
    page.wait_for_function(
        f"(n) => {PARCOORDS}._fullData && {PARCOORDS}._fullData[0]._length === n "
        f"&& {SCATTERS}.length > 0 && {SCATTERS}.every((d) => d._fullData "
        "&& d._fullData[0].x.length === n)",
        arg=len(ids),
    )


def _apply(page, text: str) -> None:
    page.fill(".trials-filter", text)
    with page.expect_navigation():
        page.press(".trials-filter", "Enter")


def test_the_charts_follow_the_filter(live_server, chromium):
    user = get_user_model().objects.create_user("nora", password="pw-nora")
    experiment, trials = hparam_search(user, 60, name="filter-charts")
    every = sorted(t.id for t in trials)
    adam = sorted(t.id for t in trials if t.hparams["optimizer"] == "adam")
    low = sorted(
        t.id for t in trials if t.hparams["optimizer"] == "adam" and t.hparams["dropout"] < 0.3
    )
    assert 0 < len(low) < len(adam) < len(every)
    url = f"{live_server.url}/experiments/{experiment.id}/"
    page = chromium.new_page(viewport={"width": 1440, "height": 3000})
    log_in(page, url, "nora", "pw-nora")
    _wait_drawn(page, every, 60)

    # A filter: the charts draw the 30 matching trials, not the 60.
    _apply(page, ADAM)
    _wait_drawn(page, adam, 60)
    save_screenshot(page, "trials-filter-charts")

    # Top N ranks the matching trials: 5 of them, not the matching ones among the best 5 of all.
    page.fill(".legend-top", "5")
    page.wait_for_function(
        "document.querySelector('.legend-count').textContent === '5 of 60 trials in the charts'"
    )
    top = page.evaluate("TrialsLegend.visibleIds()")
    assert len(top) == 5 and set(top) <= set(adam)
    page.fill(".legend-top", "")
    _wait_drawn(page, adam, 60)

    # A sort swaps the table in place: the charts keep the filter.
    page.click("th a.sort:text-is('State')")
    page.wait_for_function("location.search.includes('sort=state')")
    _wait_drawn(page, adam, 60)

    # A table swapped in with another filter (what a live update or a page change does):
    # the charts follow it.
    page.evaluate(
        """([url, filter]) => fetch(url + '?filter=' + encodeURIComponent(filter))
          .then((r) => r.text())
          .then((html) => TrialsTable.replace(document.getElementById('trials'), html))""",
        [f"{url}trials/", ADAM_LOW_DROPOUT],
    )
    _wait_drawn(page, low, 60)

    # A new filter typed in the box.
    _apply(page, ADAM_LOW_DROPOUT.replace("<", ">="))
    _wait_drawn(page, sorted(set(adam) - set(low)), 60)

    # A malformed filter: the table says so and ignores it; the charts draw every trial.
    _apply(page, "validation_accuracy >")
    page.wait_for_selector(".trials-filter-error")
    _wait_drawn(page, every, 60)
