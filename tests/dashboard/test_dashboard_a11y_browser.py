"""Accessibility, themes and keyboard in a real headless Chromium: axe-core (every rule it runs by
default) finds no violation on any dashboard page in the light or the dark theme; the theme
toggle applies, persists and recolours the charts; the chart toolbars hold no dead button and
no tab stop, and the chart's own keys do what the toolbar does."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser import log_in, save_screenshot
from tests.browser_pages import PASSWORD, USERNAME, populate, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHART = "document.querySelector('.js-plotly-plot[role=group]')"


def _violations(page) -> list[str]:
    """axe-core's violations on the page, one line each: rule, impact, the first few nodes."""
    response = Axe().run(page).response
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> "
        + "; ".join(
            f"{node['target']} {node.get('failureSummary', '')[:160]!r}" for node in v["nodes"][:4]
        )
        for v in response["violations"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_on_any_page(live_server, chromium, scheme):
    _, pages = populate()
    # The theme follows the system's preference until the user picks one ("system").
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{live_server.url}/")
    assert page.evaluate("document.documentElement.dataset.theme") == scheme
    found = {"login": _violations(page)}
    save_screenshot(page, f"a11y-{scheme}-login")
    log_in(page, f"{live_server.url}/", USERNAME, PASSWORD)
    for name, path in pages.items():
        page.goto(live_server.url + path)
        settle(page)
        assert page.evaluate("document.documentElement.dataset.theme") == scheme
        found[name] = _violations(page)
        save_screenshot(page, f"a11y-{scheme}-{name}")
    context.close()
    problems = [f"{name}: {line}" for name, lines in found.items() for line in lines]
    assert not problems, "\n".join(problems)


def test_theme_toggle_applies_persists_and_recolours_charts(live_server, chromium):
    _, pages = populate()
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    page = context.new_page()
    log_in(page, live_server.url + pages["trial"], USERNAME, PASSWORD)
    settle(page)
    # No flash of the wrong theme: theme.js runs in <head>, blocking, before the stylesheet.
    loader = page.evaluate(
        """() => { const s = document.querySelector('head script[src*="js/theme"]');
                   const css = document.querySelector('head link[rel=stylesheet]');
                   return {defer: s.defer, async: s.async,
                           first: !!(s.compareDocumentPosition(css) & Node.DOCUMENT_POSITION_FOLLOWING)}; }"""
    )
    assert loader == {"defer": False, "async": False, "first": True}
    chart = "document.querySelector('.js-plotly-plot')"
    assert page.evaluate(f"{chart}._fullLayout.paper_bgcolor") == "#ffffff"
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.evaluate(
        "document.addEventListener('hw:theme', (e) => { window.themeEvents = "
        "(window.themeEvents || []).concat([e.detail]); })"
    )

    page.select_option("#theme-select", "dark")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("window.themeEvents") == [{"theme": "dark", "choice": "dark"}]
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    page.wait_for_function(f"{chart}._fullLayout.paper_bgcolor === '#0d1117'")
    assert page.evaluate(f"{chart}._fullLayout.font.color") == "#e6edf3"
    save_screenshot(page, "theme-dark-trial")

    # Remembered across pages and reloads, over the system's light preference.
    page.goto(live_server.url + pages["experiment"])
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.input_value("#theme-select") == "dark"
    settle(page)
    assert page.evaluate(f"{chart}._fullLayout.paper_bgcolor") == "#0d1117"

    # "System" follows prefers-color-scheme again, live.
    page.select_option("#theme-select", "system")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'")
    context.close()


def test_chart_toolbars_have_no_dead_buttons_and_no_tab_stops(live_server, chromium):
    _, pages = populate()
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, live_server.url + pages["trial"], USERNAME, PASSWORD)
    settle(page)  # every chart drawn (they are drawn only near the viewport)
    buttons = page.evaluate(
        "Array.from(document.querySelectorAll('.modebar-btn'))"
        ".map((b) => [b.dataset.title, b.getAttribute('tabindex')])"
    )
    titles = {title for title, _ in buttons}
    assert titles and all(tabindex == "-1" for _, tabindex in buttons)
    dead = {"Produced with Plotly.js", "Edit in Chart Studio", "Box Select", "Lasso Select"}
    assert not titles & dead and not any("Cloud" in t or "Chart Studio" in t for t in titles)

    # Tabbing from the top of the page reaches each chart once, never a toolbar button.
    charts = page.locator(".js-plotly-plot[role=group]")
    count = charts.count()
    stops = []
    for _ in range(300):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "(() => { const el = document.activeElement;"
            " return el === document.body ? null : el.className.baseVal ?? el.className; })()"
        )
        if focused is None:
            break
        stops.append(focused)
    assert not any("modebar" in stop for stop in stops)
    assert sum("js-plotly-plot" in stop for stop in stops) == count == charts.count() > 0

    # The chart's keys: + zooms in, R resets the axes.
    chart = charts.first
    assert "D downloads a PNG" in (chart.get_attribute("aria-label") or "")
    chart.focus()
    width = "(gd) => gd._fullLayout.xaxis.range[1] - gd._fullLayout.xaxis.range[0]"
    before = chart.evaluate(width)
    page.keyboard.press("+")
    page.wait_for_function(f"({width})({CHART}) < {before}")
    page.keyboard.press("r")
    page.wait_for_function(f"Math.abs(({width})({CHART}) - {before}) < 1e-9 * {before}")

    # D downloads a PNG, with the Content-Security-Policy on (the image goes through data: URLs).
    strict = chromium.new_context(
        viewport={"width": 1280, "height": 900}, accept_downloads=True, bypass_csp=False
    )
    page = strict.new_page()
    log_in(page, live_server.url + pages["trial"], USERNAME, PASSWORD)
    chart = page.locator(".js-plotly-plot[role=group]").first
    chart.wait_for()
    chart.focus()
    with page.expect_download() as download:
        page.keyboard.press("d")
    assert download.value.suggested_filename.endswith(".png")
    strict.close()
