"""The trials table's filter box, chosen columns and saved views in a real headless Chromium:
a user types a filter and sees only the matching rows, adds a metric column, sorts by it (the
page swaps the sorted rows in, keeping the filter), selects every matching trial, saves the
view, and another user applies it from the list of views."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from dashboard.models import SavedView
from tests.browser import assert_accessible, log_in, save_screenshot
from tests.helpers_hparams import hparam_search

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROWS = "#trials tbody tr[data-trial]"
FILTER = 'hparams.optimizer = "adam" and validation_accuracy > 0'


def _row_ids(page) -> list[int]:
    return page.evaluate(
        f"Array.from(document.querySelectorAll('{ROWS}')).map(r => Number(r.dataset.trial))"
    )


def _loss(trial) -> float:
    return trial.summary_metrics["validation"]["validation_loss"]["last"]


def test_filter_columns_sort_and_a_shared_view(live_server, chromium):
    users = get_user_model().objects
    alice = users.create_user("vera", password="pw-vera")
    users.create_user("walt", password="pw-walt")
    experiment, trials = hparam_search(alice, 60, name="views-60")
    adam = [t for t in trials if t.hparams["optimizer"] == "adam"]
    by_loss = [t.id for t in sorted(adam, key=lambda t: (_loss(t), t.id))]
    url = f"{live_server.url}/experiments/{experiment.id}/"

    page = chromium.new_page(viewport={"width": 1440, "height": 1000})
    log_in(page, url, "vera", "pw-vera")
    assert len(_row_ids(page)) == 50

    # Type a filter: the page reloads with only the matching trials, the filter in the URL.
    page.fill(".trials-filter", FILTER)
    page.press(".trials-filter", "Enter")
    page.wait_for_url("**filter=**")
    assert sorted(_row_ids(page)) == sorted(t.id for t in adam)
    assert page.input_value(".trials-filter") == FILTER

    # A malformed filter shows the parser's message under the box.
    page.fill(".trials-filter", "validation_accuracy >")
    page.press(".trials-filter", "Enter")
    page.wait_for_selector(".trials-filter-error")
    assert "expected a value" in page.text_content(".trials-filter-error")
    page.fill(".trials-filter", FILTER)
    page.press(".trials-filter", "Enter")
    page.wait_for_function(f"document.querySelectorAll('{ROWS}').length === {len(adam)}")

    # Add a metric column, then sort by it on the server (swapped in place, filter kept).
    page.fill(".trials-add-column", "validation_loss")
    page.click(".trials-apply")
    page.wait_for_selector("th.chosen-column")
    assert page.text_content("th.chosen-column a.sort").strip() == "validation_loss"
    page.click("th.chosen-column a.sort")
    page.wait_for_selector('th.chosen-column[aria-sort="ascending"]')
    assert _row_ids(page) == by_loss
    assert "sort=validation_loss" in page.url and "filter=" in page.url
    assert page.text_content(f"#trial-{by_loss[0]} td.chosen-value").strip() != ""

    # Select all matching: the filtered trials only, though the charts' legend has all 60.
    page.check("input.select-all")
    page.wait_for_function(
        f"document.querySelector('.selected-count').textContent === '{len(adam)} selected'"
    )
    assert_accessible(page)
    save_screenshot(page, "trials-filter-columns")

    # Save the view; the page comes back with it applied.
    page.fill(".view-name", "adam by loss")
    page.click(".save-view button[type=submit]")
    page.wait_for_selector("a.saved-view-link")
    view = SavedView.objects.get()
    assert (view.filter, view.sort, view.columns) == (
        FILTER,
        "validation_loss",
        ["validation_loss"],
    )

    # Another user who reads the experiment sees the view and applies it.
    other = chromium.new_page(viewport={"width": 1440, "height": 1000})
    log_in(other, url, "walt", "pw-walt")
    assert len(_row_ids(other)) == 50
    link = other.locator("a.saved-view-link", has_text="adam by loss")
    assert "by vera" in other.text_content(".saved-view")
    link.click()
    other.wait_for_selector("th.chosen-column")
    assert _row_ids(other) == by_loss
    assert other.input_value(".trials-filter") == FILTER
    assert other.locator(".saved-view button").count() == 0  # only its owner deletes it
    save_screenshot(other, "trials-saved-view")
