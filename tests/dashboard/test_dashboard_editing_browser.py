"""Editing an experiment's name and notes through the dashboard in a real headless Chromium
(``live_server``): the owner opens the edit boxes, saves, and sees the new name and the rendered,
sanitised Markdown; a refused value comes back on its field; another user sees no edit box."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from registry.models import Experiment
from tests.browser import assert_accessible, log_in, save_screenshot
from tests.helpers import DASHBOARD_CONFIG

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = """## Findings

**lr 1e-3** diverges after `epoch 3`; see [the run](https://example.com/run).

- try warmup
- halve the batch

<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">
[bad](javascript:window.__pwned=3)
"""


def test_owner_edits_name_and_notes_and_sees_rendered_markdown(live_server, chromium):
    owner = get_user_model().objects.create_user("erin", password="pw-erin")
    get_user_model().objects.create_user("fred", password="pw-fred")
    experiment = Experiment.objects.create(
        owner=owner, name="before", config=DASHBOARD_CONFIG, model_definition=b""
    )
    url = f"{live_server.url}/experiments/{experiment.id}/"
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, url, "erin", "pw-erin")

    # Name and labels: the <details> box opens without any script.
    page.click("#experiment-edit > summary")
    page.fill("#edit-name", "after: tuned lr")
    page.fill("#edit-labels", "baseline, lr-sweep")
    page.click("#experiment-edit button[type=submit]")
    page.wait_for_url(url)
    assert "after: tuned lr" in page.inner_text("h1")
    assert page.locator(".summary .label").all_inner_texts() == ["baseline", "lr-sweep"]
    assert "saved" in page.inner_text(".message-success")

    # Notes: Markdown rendered on the server; script, onerror and javascript: links stripped.
    page.click("#notes-edit > summary")
    page.fill("#notes-input", NOTES)
    page.click("#notes-edit button[type=submit]")
    page.wait_for_url(f"{url}#notes")
    body = page.locator("#notes-body")
    assert body.locator("h2").inner_text() == "Findings"
    assert body.locator("strong").inner_text() == "lr 1e-3"
    assert body.locator("li").all_inner_texts() == ["try warmup", "halve the batch"]
    link = body.locator("a[href='https://example.com/run']")
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert body.locator("script, img, a[href^='javascript']").count() == 0
    page.click("text=bad")  # the neutered link does nothing
    assert page.evaluate("window.__pwned") is None
    assert page.input_value("#notes-input").strip() == NOTES.strip()  # kept as typed
    assert_accessible(page)
    save_screenshot(page, "experiment-notes")

    # A refused value: the form comes back with the error on its field, nothing saved.
    page.goto(url)
    page.click("#experiment-edit > summary")
    page.fill("#edit-labels", "x" * 300)
    page.click("#experiment-edit button[type=submit]")
    assert "labels:" in page.inner_text(".field-error")
    assert page.input_value("#id_labels") == "x" * 300
    assert_accessible(page)
    experiment.refresh_from_db()
    assert experiment.labels == ["baseline", "lr-sweep"]
    assert errors == []

    # Another user reads the notes but gets no edit box.
    other = chromium.new_page()
    log_in(other, url, "fred", "pw-fred")
    assert other.locator("#notes-body strong").inner_text() == "lr 1e-3"
    assert other.locator("#experiment-edit, #notes-edit").count() == 0
