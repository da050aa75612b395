"""Shared parts of the browser tests: headless Debian Chromium driven by Playwright.

Tests take the ``chromium`` fixture (``tests/plugin.py``), a launched ``Browser``; without
``/usr/bin/chromium`` it skips, except under ``CI=true`` where a missing Chromium fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHARTS = "#metrics-board .metric-chart .js-plotly-plot"

# Every control has an accessible name; headings never skip a level; there is an h1.
A11Y_PROBLEMS = """() => {
  const problems = [];
  const named = (el) => {
    if ((el.getAttribute('aria-label') || '').trim()) return true;
    const by = el.getAttribute('aria-labelledby');
    if (by && by.split(' ').some((id) => (document.getElementById(id)?.textContent || '').trim()))
      return true;
    if (el.labels && Array.from(el.labels).some((l) => l.textContent.trim())) return true;
    if ((el.getAttribute('title') || '').trim()) return true;
    if (el.tagName === 'INPUT' && ['submit', 'button'].includes(el.type) && el.value) return true;
    return el.textContent.trim().length > 0;
  };
  const controls = 'a[href], button, input:not([type=hidden]), select, textarea';
  for (const el of document.querySelectorAll(controls)) {
    if (el.closest('.js-plotly-plot')) continue;  // Plotly's own toolbar
    if (!named(el)) problems.push('unnamed ' + el.outerHTML.slice(0, 120));
  }
  let last = 0;
  for (const h of document.querySelectorAll('main h1, main h2, main h3, main h4')) {
    const level = Number(h.tagName[1]);
    if (last && level > last + 1) problems.push('heading skips a level: ' + h.textContent.trim());
    last = level;
  }
  if (!document.querySelector('main h1')) problems.push('no h1');
  return problems;
}"""


def require_chromium() -> None:
    """Skip without Chromium; fail instead under ``CI=true`` (a green CI never hides a skip)."""
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} is not installed"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextlib.contextmanager
def launch_chromium(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless Chromium ``Browser`` for the block, closed after it."""
    require_chromium()
    # Playwright's sync API runs an asyncio loop in this thread, which trips Django's async
    # guard on ORM calls; the tests' ORM writes are plain synchronous code, so that is safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield _CspBypassingBrowser(browser)
        finally:
            browser.close()


class _CspBypassingBrowser:
    """A ``Browser`` whose pages skip the Content-Security-Policy unless asked not to
    (``bypass_csp=False``): Playwright's ``wait_for_function`` evaluates its predicate with
    ``eval``, which the dashboard's policy forbids. tests/dashboard/test_csp_browser.py keeps the policy."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def new_page(self, **options: Any) -> Any:
        return self._browser.new_page(**{"bypass_csp": True, **options})

    def new_context(self, **options: Any) -> Any:
        return self._browser.new_context(**{"bypass_csp": True, **options})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


def log_in(page: Any, url: str, username: str, password: str) -> None:
    """Open ``url``, which sends an anonymous user to the login form, and log in."""
    page.goto(url)
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(url)


def save_screenshot(page: Any, name: str) -> Path:
    """Save a full-page PNG as ``test-artifacts/<name>.png`` (git-ignored) and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


def chart_js(key: str) -> str:
    """A JS expression for the Plotly div of metric ``key`` (``group/name``) on the page."""
    return "document.querySelector('#metrics-board .plot[data-key=\"" + key + "\"]')"


def assert_accessible(page: Any) -> None:
    """Every control on the page has an accessible name and headings are ordered."""
    assert page.evaluate(A11Y_PROBLEMS) == []
