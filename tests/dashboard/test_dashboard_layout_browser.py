"""Narrow-screen layout in a real headless Chromium: no dashboard page scrolls sideways at 390,
768, 1280 or 1440 px (tables scroll inside their own wrapper, the top bar wraps, charts fit);
a screenshot of each page at each width goes to test-artifacts/."""

from __future__ import annotations

import pytest

from tests.browser import log_in, save_screenshot
from tests.browser_pages import PASSWORD, USERNAME, populate, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 768, 1280, 1440)

# The page's own width against the window's, and what sticks out when it overflows.
OVERFLOW = """() => {
  const width = window.innerWidth;
  const wide = Array.from(document.querySelectorAll('body *'))
    .filter((el) => el.getBoundingClientRect().right > width + 0.5)
    .filter((el) => !el.closest('.table-scroll, .js-plotly-plot, .skip-link'))
    .slice(0, 5)
    .map((el) => el.tagName.toLowerCase() + '.' + el.className + ' ' +
      Math.round(el.getBoundingClientRect().right));
  return {scroll: document.documentElement.scrollWidth, width: width, wide: wide};
}"""


def _assert_fits(page, name: str, width: int) -> None:
    found = page.evaluate(OVERFLOW)
    assert found["scroll"] <= found["width"], f"{name} at {width} px: {found}"


def test_no_page_scrolls_sideways_at_any_width(live_server, chromium):
    _, pages = populate()
    for width in WIDTHS:
        context = chromium.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        page.goto(f"{live_server.url}/")
        assert "/accounts/login/" in page.url
        _assert_fits(page, "login", width)
        save_screenshot(page, f"layout-login-{width}")
        log_in(page, f"{live_server.url}/", USERNAME, PASSWORD)
        for name, path in pages.items():
            page.goto(live_server.url + path)
            settle(page)
            _assert_fits(page, name, width)
            save_screenshot(page, f"layout-{name}-{width}")
        context.close()


def test_wide_tables_scroll_inside_their_wrapper_and_charts_fit(live_server, chromium):
    _, pages = populate()
    page = chromium.new_page(viewport={"width": 390, "height": 900})
    log_in(page, live_server.url + pages["experiment"], USERNAME, PASSWORD)
    settle(page)
    # The trials table (hparams as columns) is wider than a phone: its wrapper scrolls, not the page.
    wrapper = page.evaluate(
        """() => { const w = document.querySelector('.table-scroll');
                   return {scroll: w.scrollWidth, client: w.clientWidth,
                           overflow: getComputedStyle(w).overflowX}; }"""
    )
    assert wrapper["scroll"] > wrapper["client"] and wrapper["overflow"] == "auto"
    # Every drawn chart fits the window (plotly's responsive resize to its container).
    page.locator(".js-plotly-plot").first.wait_for()
    widths = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".map((gd) => gd.getBoundingClientRect().right)"
    )
    assert widths and max(widths) <= 390
    # The top bar wraps onto several rows instead of being cut.
    topbar = page.evaluate(
        "(() => { const r = document.querySelector('.topbar').getBoundingClientRect();"
        " return {right: r.right, height: r.height}; })()"
    )
    assert topbar["right"] <= 390 and topbar["height"] > 40
