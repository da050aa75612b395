"""The experiment page's trials table as the charts' shared legend, in a real headless Chromium,
on a finished 100-trial random search (``tests/helpers_hparams.hparam_search``, metrics stored
through ``registry.metrics``): server-side pages of rows, the best trial first, search, top N, hide / show,
colour by a hyperparameter, hover in both directions, the events of the contract
(``hw:trials-visible``, ``hw:trial-colors``, ``hw:trial-hover``, ``hw:hparam-filter``), forms
built on demand, no horizontal overflow at 1440 px, and the browser's number format matching
the server's ``sig4``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from dashboard.templatetags.numbers import sig4_text
from tests.browser import CHARTS, log_in, save_screenshot
from tests.helpers_hparams import hparam_search

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIALS = 100
ROWS = "#trials tbody tr"

# Record every contract event from the first script on (the table emits on load).
RECORDER = """
window.__events = [];
for (const name of ['hw:trials-visible', 'hw:trial-colors', 'hw:trial-hover']) {
  document.addEventListener(name, (e) => window.__events.push({name, detail: e.detail}));
}
"""


def _last(page, name: str) -> dict:
    events = page.evaluate("window.__events")
    found = [e["detail"] for e in events if e["name"] == name]
    assert found, f"no {name} event"
    return found[-1]


def _visible(page, ids: list[int]) -> None:
    """Wait until the latest ``hw:trials-visible`` carries ``ids`` (the table sends it on the
    next task, or after a pause in typing)."""
    page.wait_for_function(
        """(want) => {
          const e = window.__events.filter((x) => x.name === 'hw:trials-visible').pop();
          return e && JSON.stringify(e.detail.ids) === JSON.stringify(want);
        }""",
        arg=ids,
    )


def _next_colors(page, before: int) -> dict:
    """The first ``hw:trial-colors`` after the ``before``-th one."""
    page.wait_for_function(
        "(n) => window.__events.filter((x) => x.name === 'hw:trial-colors').length > n",
        arg=before,
    )
    return _last(page, "hw:trial-colors")


def _count(page, name: str) -> int:
    return page.evaluate("(n) => window.__events.filter((x) => x.name === n).length", name)


def _row_ids(page) -> list[int]:
    return page.evaluate(
        f"Array.from(document.querySelectorAll('{ROWS}')).map(r => Number(r.dataset.trial))"
    )


def test_the_trials_table_is_the_charts_legend(live_server, chromium):
    user = get_user_model().objects.create_user("lena", password="pw-lena")
    experiment, trials = hparam_search(user, TRIALS, name="legend-100")
    for trial in trials:
        trial.refresh_from_db()
    by_accuracy = sorted(trials, key=lambda t: (-t.best_validation, t.id))  # larger is better
    best = by_accuracy[0]
    all_ids = sorted(t.id for t in trials)

    page = chromium.new_page(viewport={"width": 1440, "height": 1000})
    page.add_init_script(RECORDER)
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "lena", "pw-lena")
    page.wait_for_selector(f"{ROWS}.best-trial")

    # One page of rows in the document, the best first and highlighted; no forms built yet.
    assert len(_row_ids(page)) == 50
    assert _row_ids(page)[0] == best.id
    assert page.is_visible(".trials-pager")
    assert (
        page.evaluate(
            "document.querySelectorAll('#trials tbody form, #trials .row-menu-panel').length"
        )
        == 0
    )
    _visible(page, all_ids)
    colors = _next_colors(page, 0)
    assert colors["best"] == best.id
    # From 20 trials, colours come from a palette of 10 (lines of one colour merge in a trace).
    assert len(set(colors["colors"].values())) == 10

    # Search by a hyperparameter value: the charts keep the adam trials; the page's other rows
    # are dimmed (the table pages on the server and still lists every trial).
    adam = sorted(t.id for t in trials if t.hparams["optimizer"] == "adam")
    page.fill(".legend-search", "optimizer=adam")
    page.wait_for_function("document.querySelector('.legend-count').textContent.startsWith('50 ')")
    dimmed = page.evaluate(
        "Array.from(document.querySelectorAll('#trials tr.legend-filtered'))"
        ".map(r => Number(r.dataset.trial))"
    )
    assert sorted(dimmed) == sorted(i for i in _row_ids(page) if i not in adam)
    _visible(page, adam)
    # By trial id.
    page.fill(".legend-search", f"#{trials[7].id}")
    page.wait_for_function("document.querySelector('.legend-count').textContent.startsWith('1 ')")
    _visible(page, [trials[7].id])
    page.fill(".legend-search", "")

    # Top 5 by the searcher metric (larger is better).
    page.fill(".legend-top", "5")
    page.wait_for_function("document.querySelector('.legend-count').textContent.startsWith('5 ')")
    top5 = [t.id for t in by_accuracy[:5]]
    _visible(page, sorted(top5))
    assert _row_ids(page)[:5] == top5  # the default sort: best first
    page.fill(".legend-top", "")
    _visible(page, all_ids)

    # Hide all, show all, hide one row.
    page.click(".legend-hide-all")
    _visible(page, [])
    assert page.evaluate("document.querySelectorAll('#trials tr.legend-off').length") == 50
    page.click(".legend-show-all")
    _visible(page, all_ids)
    second = _row_ids(page)[1]
    page.click(f"#trial-{second} .legend-toggle")
    _visible(page, [i for i in all_ids if i != second])
    assert page.get_attribute(f"#trial-{second} .legend-toggle", "aria-pressed") == "false"
    page.click(f"#trial-{second} .legend-toggle")
    _visible(page, all_ids)

    # The parallel-coordinates filter narrows what the charts draw (intersected with search).
    kept = all_ids[:30]
    page.evaluate(
        "ids => document.dispatchEvent(new CustomEvent('hw:hparam-filter', {detail: {ids}}))", kept
    )
    _visible(page, kept)
    page.fill(".legend-search", "optimizer=adam")
    _visible(page, [i for i in kept if i in adam])
    page.fill(".legend-search", "")
    page.evaluate(
        "document.dispatchEvent(new CustomEvent('hw:hparam-filter', {detail: {ids: null}}))"
    )
    _visible(page, all_ids)

    # Colour by a categorical and a numeric hyperparameter: one colour per distinct value.
    before = _count(page, "hw:trial-colors")
    page.select_option(".legend-color-by", "hp:optimizer")
    colors = _next_colors(page, before)["colors"]
    assert {colors[str(i)] for i in adam} != {colors[str(i)] for i in all_ids if i not in adam}
    assert len({colors[str(i)] for i in adam}) == 1
    assert len(set(colors.values())) == 2
    assert page.evaluate("document.querySelectorAll('.legend-scale .legend-chip').length") == 2
    swatch = page.evaluate(
        f"getComputedStyle(document.querySelector('#trial-{adam[0]} .swatch')).backgroundColor"
    )
    red, green, blue = (int(colors[str(adam[0])][k : k + 2], 16) for k in (1, 3, 5))
    assert swatch == f"rgb({red}, {green}, {blue})"
    before = _count(page, "hw:trial-colors")
    page.select_option(".legend-color-by", "hp:layers.width")
    colors = _next_colors(page, before)["colors"]
    by_width: dict[int, set[str]] = {}
    for t in trials:
        by_width.setdefault(t.hparams["layers"]["width"], set()).add(colors[str(t.id)])
    assert all(len(c) == 1 for c in by_width.values())
    assert len(set.union(*by_width.values())) == len(by_width)  # distinct values, distinct colours

    # Hover: a row emits hw:trial-hover; a chart's hover lights the row.
    row = _row_ids(page)[3]
    page.hover(f"#trial-{row} td:nth-child(4)")
    assert _last(page, "hw:trial-hover") == {"id": row, "source": "trials-table"}
    page.evaluate(
        "id => document.dispatchEvent(new CustomEvent('hw:trial-hover', "
        "{detail: {id, source: 'metric-chart'}}))",
        best.id,
    )
    assert "hover-linked" in page.get_attribute(f"#trial-{best.id}", "class")

    # Numbers: 4 significant digits, the exact value in the title, the same text as sig4.
    shown = page.inner_text(f"#trial-{best.id} td:nth-child(5)")
    assert shown.strip() == sig4_text(best.best_validation)
    assert page.get_attribute(f"#trial-{best.id} td:nth-child(5) .num", "title") == repr(
        best.best_validation
    )
    page.wait_for_selector(CHARTS)
    hover = page.evaluate(f"document.querySelector('{CHARTS}')._fullLayout.yaxis.hoverformat")
    assert hover == page.evaluate("HeadwayFormat.D3") == ".4~g"  # chart hovers: 4 digits too
    values = [0.0006482765922226792, 123456.7, 9.99996, 1e-7, 6.5e-8, 1.5e22, -0.5, 2.0, 12345]
    js = page.evaluate("vs => vs.map(v => HeadwayFormat.number(v))", values)
    assert js == [sig4_text(v) for v in values]

    # The next page; a row's controls are built when its Actions button is pressed.
    first_page = _row_ids(page)
    page.click(".trials-pager .pager-next")
    page.wait_for_function(
        "(id) => Number(document.querySelector('#trials tbody tr').dataset.trial) !== id",
        arg=first_page[0],
    )
    assert (
        len(_row_ids(page)) == 50
        and not set(first_page) & set(_row_ids(page))
        and best.id not in _row_ids(page)[1:]
    )
    target = _row_ids(page)[0]
    page.click(f"#trial-{target} button.row-menu")
    assert page.get_attribute(f"#trial-{target} button.row-menu", "aria-expanded") == "true"
    assert page.evaluate("document.querySelectorAll('#trials .row-menu-panel').length") == 1
    page.wait_for_selector(f"#trial-{target} .row-menu-panel .controls", state="attached")
    assert "No controls for this trial" in page.inner_text(f"#trial-{target} .row-menu-panel")

    # Sorting (on the server) by the best column: best values first by default (larger is
    # better here), then reversed.
    page.click(".trials-pager .pager-prev")
    page.wait_for_function(
        "(id) => Number(document.querySelector('#trials tbody tr').dataset.trial) === id",
        arg=best.id,
    )
    assert _row_ids(page)[:3] == [t.id for t in by_accuracy[:3]]
    page.click("#trials th:nth-child(5) a.sort")
    page.wait_for_selector("#trials th:nth-child(5)[aria-sort=descending]")
    assert _row_ids(page)[:3] == [t.id for t in by_accuracy[::-1][:3]]
    page.click("#trials th:nth-child(5) a.sort")
    page.wait_for_selector("#trials th:nth-child(5)[aria-sort=ascending]")

    # A copy of a number gets its exact value.
    copied = page.evaluate(
        """(sel) => {
          const range = document.createRange();
          range.selectNodeContents(document.querySelector(sel));
          getSelection().removeAllRanges();
          getSelection().addRange(range);
          const data = new DataTransfer();
          document.dispatchEvent(new ClipboardEvent('copy', {clipboardData: data}));
          return data.getData('text/plain');
        }""",
        f"#trial-{best.id} td:nth-child(5)",
    )
    assert copied.strip() == repr(best.best_validation)

    # A live swap of the table (experiment.js) keeps the legend's state.
    page.fill(".legend-search", "optimizer=sgd")
    page.evaluate(
        """async (url) => {
          const data = await (await fetch(url)).json();
          TrialsTable.replace(document.getElementById('trials'), data.trials_html);
        }""",
        f"{url}live",
    )
    assert page.input_value(".legend-search") == "optimizer=sgd"
    sgd = [t.id for t in trials if t.hparams["optimizer"] == "sgd"]
    dimmed = page.evaluate(
        "Array.from(document.querySelectorAll('#trials tr.legend-filtered'))"
        ".map(r => Number(r.dataset.trial))"
    )
    assert sorted(dimmed) == sorted(i for i in _row_ids(page) if i not in sgd)
    page.fill(".legend-search", "")

    # No horizontal scrolling of the page, nor of the table, at 1440 px.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.evaluate(
        "(() => { const t = document.querySelector('#trials .table-scroll');"
        " return t.scrollWidth <= t.clientWidth; })()"
    )
    save_screenshot(page, "trials-legend")
