"""The log viewer in headless Chromium: level and rank filters, error highlighting,
jump to the first error, and the download of the whole log."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.models import Experiment, State, Trial, TrialLog
from tests.helpers import DASHBOARD_CONFIG

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (message, level logs.js must find, rank)
LINES = [
    ("[rank=0] || INFO: [123] headway.core: starting", "info", "0"),
    ("[rank=1] || INFO: [124] headway.core: starting", "info", "1"),
    ("WARNING:root:the learning rate is large", "warning", ""),
    ("2026-11-25 10:00:00,123 DEBUG loading shard 3", "debug", ""),
    ("plain output without a level: epoch 1 loss=0.3", "info", ""),
    ("/x/model_def.py:12: UserWarning: deprecated", "warning", ""),
    ("[rank=1] || Traceback (most recent call last):", "error", "1"),
    ('[rank=1] ||   File "model_def.py", line 3, in train_batch', "error", "1"),
    ("[rank=1] || RuntimeError: CUDA out of memory", "error", "1"),
    ("[2026-11-25T10:00:01Z] CRITICAL the worker lost its lease", "critical", ""),
    ("[rank=0] || ERROR: [123] headway.core: rank 1 failed", "error", "0"),
    ("errors=0 is not an error line", "info", ""),
]


def test_filters_highlight_jump_and_download(live_server, chromium) -> None:
    from tests.browser import assert_accessible, log_in, save_screenshot

    user = get_user_model().objects.create_user("lotte", password="pw-lotte")
    experiment = Experiment.objects.create(
        owner=user, name="logs", config=DASHBOARD_CONFIG, model_definition=b""
    )
    trial = Trial.objects.create(experiment=experiment, hparams={}, state=State.COMPLETED)
    filler = [f"filler line {i}" for i in range(300)]  # the first error is far down the page
    messages = filler + [m for m, _, _ in LINES]
    TrialLog.objects.bulk_create(TrialLog(trial=trial, run_id=1, message=m) for m in messages)
    page = chromium.new_page(viewport={"width": 1280, "height": 800})
    url = f"{live_server.url}/trials/{trial.id}/logs/"
    log_in(page, url, "lotte", "pw-lotte")

    found = page.eval_on_selector_all(
        "#log-lines .log-line",
        "lines => lines.map(l => [l.dataset.level, l.dataset.rank])",
    )
    assert found[300:] == [[level, rank] for _, level, rank in LINES]
    errors = page.eval_on_selector_all("#log-lines .log-error", "ls => ls.length")
    assert errors == sum(level in ("error", "critical") for _, level, _ in LINES)

    def shown() -> list[str]:
        return page.eval_on_selector_all(
            "#log-lines .log-line:not([hidden])",
            "ls => ls.map(l => l.lastChild.textContent.trim())",
        )

    # Only error lines: untick every other level.
    for level in ("debug", "info", "warning", "critical"):
        page.uncheck(f"#log-tools input[value={level}]")
    assert shown() == [m for m, level, _ in LINES if level == "error"]
    # Rank 1 among them.
    page.select_option("#log-rank", "1")
    assert shown() == [m for m, level, rank in LINES if level == "error" and rank == "1"]
    assert page.eval_on_selector_all("#log-rank option", "os => os.map(o => o.value)") == [
        "",
        "0",
        "1",
    ]
    page.select_option("#log-rank", "")
    for level in ("debug", "info", "warning", "critical"):
        page.check(f"#log-tools input[value={level}]")
    assert len(shown()) == len(messages)

    # Jump to the first error: the traceback's first line comes into view.
    first = page.locator("#log-lines .log-error").first
    assert not _in_view(page, first)
    page.click("#log-first-error")
    page.wait_for_function("document.querySelector('#log-lines .log-current') !== null")
    assert first.evaluate("el => el.classList.contains('log-current')")
    assert "Traceback" in first.text_content()
    assert _in_view(page, first)
    save_screenshot(page, "trial-logs-filters")
    assert_accessible(page)

    # The download has every line, oldest first.
    with page.expect_download() as info:
        page.click("#log-download")
    path = info.value.path()
    assert path is not None
    with open(path, encoding="utf-8") as fh:
        assert fh.read().splitlines() == messages


def _in_view(page, locator) -> bool:
    """Whether the element is visible inside both the log box and the window."""
    return locator.evaluate(
        """el => {
          const r = el.getBoundingClientRect();
          const box = document.getElementById('log-lines').getBoundingClientRect();
          return r.top >= Math.max(0, box.top) && r.bottom <= Math.min(window.innerHeight, box.bottom);
        }"""
    )
