"""The hyperparameter views of a 100-trial search in a real headless Chromium, under the page's
Content-Security-Policy: the parallel-coordinates chart draws one WebGL line per trial, an axis
range emits ``hw:hparam-filter`` with exactly the trials inside it, the importance bars and the
per-hyperparameter scatters are drawn, and the views follow the table's contract events."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.browser import assert_accessible, log_in, save_screenshot
from tests.browser_pages import TWO_FRAMES
from tests.helpers_hparams import hparam_search, run_queued_fits

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TRIALS = 100

# Before the page's scripts: record CSP violations and every hw:hparam-filter event.
RECORD = """
window.__cspViolations = [];
window.__filters = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline'));
});
document.addEventListener('hw:hparam-filter', (e) => window.__filters.push(e.detail));
window.__hovers = [];
document.addEventListener('hw:trial-hover', (e) => window.__hovers.push(e.detail));
"""
PARCOORDS = "document.getElementById('hparam-parcoords')"
REDRAWS = "Number(document.getElementById('hparam-views').dataset.redraws || 0)"
# Pixels with any alpha on the WebGL canvas that holds the drawn (focus) lines.
FOCUS_PIXELS = """() => {
  const gl = document.querySelector('#hparam-parcoords canvas.gl-canvas-focus');
  const out = document.createElement('canvas');
  out.width = gl.width; out.height = gl.height;
  const ctx = out.getContext('2d');
  ctx.drawImage(gl, 0, 0);
  const data = ctx.getImageData(0, 0, out.width, out.height).data;
  let n = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++;
  return n;
}"""


def _poll(page, expression: str, what: str):
    """Evaluate ``expression`` until it is truthy (Playwright's wait_for_function needs eval,
    which the policy under test forbids); bounded by a count, not a clock."""
    for _ in range(300):
        value = page.evaluate(expression)
        if value:
            return value
        page.wait_for_timeout(100)
    raise AssertionError(f"never became true: {what}")


def _restyle(page, dimension: int, constraint) -> None:
    page.evaluate(
        f"Plotly.restyle({PARCOORDS}, "
        f"{{'dimensions[{dimension}].constraintrange': [{constraint}]}}, [0])"
        if constraint is not None
        else f"Plotly.restyle({PARCOORDS}, {{'dimensions[{dimension}].constraintrange': null}}, [0])"
    )


def _last_filter(page, count: int):
    _poll(page, f"window.__filters.length >= {count}", f"{count} hw:hparam-filter events")
    return page.evaluate("window.__filters[window.__filters.length - 1].ids")


def test_parallel_coordinates_filter_importance_and_scatters(live_server, chromium):
    user = get_user_model().objects.create_user("pia", password="pw-pia")
    experiment, trials = hparam_search(user, TRIALS)
    context = chromium.new_context(viewport={"width": 1440, "height": 1000}, bypass_csp=False)
    context.add_init_script(RECORD)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    url = f"{live_server.url}/experiments/{experiment.id}/"
    log_in(page, url, "pia", "pw-pia")
    page.wait_for_load_state("networkidle")

    # The chart draws: 100 lines in the rendered trace and on the WebGL canvas, no fallback text.
    _poll(page, f"{PARCOORDS}._fullData && {PARCOORDS}._fullData.length", "parcoords drawn")
    body = page.inner_text("body")
    assert "WebGL is not supported" not in body and "{#" not in body and "{%" not in body
    full = page.evaluate(
        f"(() => {{ const t = {PARCOORDS}._fullData[0]; return {{type: t.type, "
        "length: t._length, labels: t.dimensions.map((d) => d.label), "
        "colors: t.line.color.length}; })()"
    )
    assert full["type"] == "parcoords" and full["length"] == TRIALS and full["colors"] == TRIALS
    assert full["labels"] == ["dropout", "layers.width", "lr", "optimizer", "validation_accuracy"]
    assert _poll(page, FOCUS_PIXELS, "lines on the WebGL canvas") > 1000

    # An axis range keeps exactly the trials inside it (dropout, a linear axis).
    _restyle(page, 0, "[0.2, 0.35]")
    inside = sorted(t.id for t in trials if 0.2 <= t.hparams["dropout"] <= 0.35)
    assert 0 < len(inside) < TRIALS
    assert sorted(_last_filter(page, 1)) == inside
    assert page.inner_text("#hparam-filter-status").startswith(f"{len(inside)} of {TRIALS} trials")
    # The table answers with the trials to draw (its filters and this range intersected); the
    # lines outside the range stay drawn, greyed by parcoords, so the range can be widened.
    redraws = page.evaluate(REDRAWS)
    page.evaluate(
        f"document.dispatchEvent(new CustomEvent('hw:trials-visible', {{detail: {{ids: {inside}}}}}))"
    )
    _poll(page, f"{REDRAWS} > {redraws}", "views redrawn")
    assert page.evaluate(f"{PARCOORDS}._fullData[0]._length") == TRIALS
    # A window resize (responsive charts relayout to their div) keeps each chart's height: the
    # sections below never slide under the chart.
    width = page.evaluate(f"{PARCOORDS}._fullLayout.width")
    page.set_viewport_size({"width": 1200, "height": 1000})
    _poll(page, f"{PARCOORDS}._fullLayout.width < {width}", "charts resized")
    page.evaluate(TWO_FRAMES)
    boxes = page.evaluate(
        "['hparam-parcoords', 'hparam-importance-heading', 'hparam-scatters']"
        ".map((id) => document.getElementById(id).getBoundingClientRect())"
        ".map((r) => [r.top, r.bottom])"
    )
    assert boxes[0][1] - boxes[0][0] >= 300 and boxes[1][0] >= boxes[0][1], boxes
    assert boxes[2][1] - boxes[2][0] >= 200, boxes
    page.set_viewport_size({"width": 1440, "height": 1000})
    page.locator("#hparam-views").scroll_into_view_if_needed()
    save_screenshot(page, "hparams-100-trials")
    # A second range (lr, a log axis placed by log10) narrows it further.
    _restyle(page, 2, "[-3, -2]")
    both = sorted(t.id for t in trials if t.id in inside and 1e-3 <= t.hparams["lr"] <= 1e-2)
    assert sorted(_last_filter(page, 2)) == both
    # Clearing every range: null (no filter).
    page.click("#hparam-filter-clear")
    assert _last_filter(page, 3) is None
    assert page.is_hidden("#hparam-filter-clear")

    # A mouse drag along the dropout axis sets a range the same way; the kept trials are those
    # inside the range the drag made.
    box = page.locator("#hparam-parcoords .y-axis").first.bounding_box()
    x, top, height = box["x"] + box["width"] / 2, box["y"], box["height"]
    page.mouse.move(x, top + height * 0.3)
    page.mouse.down()
    page.mouse.move(x, top + height * 0.6, steps=8)
    page.mouse.up()
    dragged = _last_filter(page, 4)
    lo, hi = page.evaluate(f"{PARCOORDS}.data[0].dimensions[0].constraintrange")
    assert sorted(dragged) == sorted(t.id for t in trials if lo <= t.hparams["dropout"] <= hi)
    assert 0 < len(dragged) < TRIALS
    page.click("#hparam-filter-clear")
    assert _last_filter(page, 5) is None

    # The importance bars: one per hyperparameter, lr and optimizer on top.
    importance = "document.getElementById('hparam-importance')"
    # Fetched near the viewport (the heading: the chart's own element is swapped for messages).
    page.locator("#hparam-importance-heading").scroll_into_view_if_needed()
    # 202 while the fit is queued: the page says so and asks again after Retry-After; the
    # master's worker's part is run here (no worker reads the tests' queue).
    _poll(page, f"{importance}.textContent.includes('Computing importance')", "fit queued")
    assert run_queued_fits() == 1
    _poll(page, f"{importance}._fullData && {importance}._fullData.length", "importance drawn")
    bars = page.evaluate(f"{importance}._fullData[0].y")
    assert len(bars) == 4 and set(bars[-2:]) == {"lr", "optimizer"}  # drawn bottom-up
    assert page.locator("#hparam-importance .bars path").count() == 4

    # One scatter per hyperparameter; the categorical one on a category axis.
    scatters = "Array.from(document.querySelectorAll('#hparam-scatters .hparam-scatter'))"
    _poll(page, f"{scatters}.every((d) => d._fullData)", "scatters drawn")
    axes = page.evaluate(f"{scatters}.map((d) => d._fullLayout.xaxis.type)")
    assert axes == ["linear", "linear", "log", "category"]

    # The table's events: only the visible trials are drawn; trial colours recolour the dots.
    shown = [t.id for t in trials[:10]]
    page.evaluate(
        f"document.dispatchEvent(new CustomEvent('hw:trials-visible', {{detail: {{ids: {shown}}}}}))"
    )
    _poll(page, f"{PARCOORDS}._fullData[0]._length === 10", "parcoords shows 10 trials")
    assert page.evaluate(f"{scatters}.map((d) => d._fullData[0].x.length)") == [10] * 4
    colors = {str(t): "#ff0000" for t in shown}
    page.evaluate(
        "document.dispatchEvent(new CustomEvent('hw:trial-colors', "
        f"{{detail: {{colors: {colors}, best: {shown[0]}}}}}))"
    )
    _poll(page, f"{scatters}[0]._fullData[0].marker.color[0] === '#ff0000'", "dots recoloured")
    # Hover: a dot hovered here names its trial; a row hovered elsewhere enlarges its dots.
    page.locator("#hparam-scatters .hparam-scatter").first.scroll_into_view_if_needed()
    point = page.evaluate(
        f"(() => {{ const d = {scatters}[0], l = d._fullLayout, t = d._fullData[0], "
        "r = d.getBoundingClientRect(); return [r.left + l._size.l + l.xaxis.d2p(t.x[1]), "
        "r.top + l._size.t + l.yaxis.d2p(t.y[1])]; })()"
    )
    page.mouse.move(0, 0)
    page.mouse.move(point[0], point[1])
    last_hover = "window.__hovers.filter((h) => h.id !== null).pop()"
    _poll(page, f"({last_hover} || {{}}).id === {shown[1]}", "hover names the trial")
    assert page.evaluate(f"{last_hover}.source") == "hparams"
    page.evaluate(
        "document.dispatchEvent(new CustomEvent('hw:trial-hover', "
        f"{{detail: {{id: {shown[2]}, source: 'table'}}}}))"
    )
    _poll(page, f"{scatters}[0]._fullData[0].marker.size[2] === 13", "hovered dot enlarged")

    assert page.evaluate("window.__cspViolations") == []
    assert errors == []
    assert_accessible(page)
