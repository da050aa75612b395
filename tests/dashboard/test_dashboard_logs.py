"""The trial logs page: search (Django test client) and live tail (headless Chromium)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from registry.models import Experiment, State, Trial, TrialLog
from tests.helpers import DASHBOARD_CONFIG


def _trial(username: str) -> Trial:
    user = get_user_model().objects.create_user(username, password=f"pw-{username}")
    experiment = Experiment.objects.create(
        owner=user, name="logs", config=DASHBOARD_CONFIG, model_definition=b""
    )
    return Trial.objects.create(experiment=experiment, hparams={})


@pytest.mark.django_db
def test_search_keeps_matching_lines_only(client):
    trial = _trial("lena")
    client.force_login(trial.experiment.owner)
    for i in range(10):
        TrialLog.objects.create(trial=trial, run_id=1, message=f"epoch {i} loss=0.{i}")
    TrialLog.objects.create(trial=trial, run_id=2, message="RuntimeError: CUDA out of memory")
    url = reverse("dashboard:trial-logs", args=[trial.id])

    html = client.get(url, {"q": "cuda"}).content.decode()
    assert "RuntimeError: CUDA out of memory" in html and "epoch 3" not in html
    assert 'data-tail="false"' in html  # a search result is not tailed
    html = client.get(url).content.decode()
    assert "epoch 9 loss=0.9" in html and 'data-tail="true"' in html
    assert "No line contains" in client.get(url, {"q": "nothing-like-this"}).content.decode()
    # Ended trials are not tailed.
    Trial.objects.filter(id=trial.id).update(state=State.COMPLETED)
    assert 'data-tail="false"' in client.get(url).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_new_lines_appear_while_the_trial_runs(live_server, chromium):
    from tests.browser import log_in, save_screenshot

    trial = _trial("mona")
    TrialLog.objects.create(trial=trial, run_id=1, message="starting <b>not bold</b>")
    page = chromium.new_page()
    url = f"{live_server.url}/trials/{trial.id}/logs/"
    log_in(page, url, "mona", "pw-mona")
    TrialLog.objects.create(trial=trial, run_id=1, message="epoch 1 <i>done</i>")
    page.wait_for_function(
        "document.getElementById('log-lines').textContent.includes('epoch 1 <i>done</i>')",
        timeout=15_000,
    )
    assert page.locator("#log-lines i").count() == 0  # shown as text, never as HTML
    Trial.objects.filter(id=trial.id).update(state=State.COMPLETED)
    page.wait_for_function(
        "document.getElementById('log-status').textContent.includes('COMPLETED')",
        timeout=15_000,
    )
    save_screenshot(page, "trial-logs")


@pytest.mark.django_db
def test_download_streams_the_whole_log_to_logged_in_users_only(client, settings):
    from dashboard.views import trial_logs

    trial = _trial("nina")
    # More lines than one chunk and than the page shows: the download has them all, in order.
    count = trial_logs.DOWNLOAD_CHUNK_LINES + 5
    TrialLog.objects.bulk_create(
        TrialLog(trial=trial, run_id=1 + i // 1000, message=f"line {i} <b>x</b>")
        for i in range(count)
    )
    url = reverse("dashboard:trial-logs-download", args=[trial.id])
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and settings.LOGIN_URL in anonymous["Location"]
    # Any logged-in user reads it, as the logs page (not only the owner).
    reader = get_user_model().objects.create_user("oscar", password="pw-oscar")
    client.force_login(reader)
    response = client.get(url)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/plain")
    assert f'filename="trial-{trial.id}-logs.txt"' in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    assert text.splitlines() == [f"line {i} <b>x</b>" for i in range(count)]
    assert client.get(reverse("dashboard:trial-logs-download", args=[999_999])).status_code == 404
    assert client.post(url).status_code == 405
    page = client.get(reverse("dashboard:trial-logs", args=[trial.id])).content.decode()
    assert f'href="{url}"' in page and 'id="log-first-error"' in page
