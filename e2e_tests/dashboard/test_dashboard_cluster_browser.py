"""The dashboard driving a real cluster (live server, Celery worker, trial processes) in headless
Chromium: Pause turns the experiment PAUSED and the trial's process exits after a checkpoint,
Activate resumes it to the end, the checkpoint download link returns the tar, Continue trial
lands on the new trial's page, and a failed trial's error shows on its page."""

from __future__ import annotations

import io
import tarfile

import pytest

from tests.browser import log_in, save_screenshot
from tests.helpers import REPO

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

CORE_API = REPO / "tests" / "fixtures" / "core_api"


def test_controls_on_a_running_experiment(cluster_api, chromium):

    trial = cluster_api.submit(CORE_API / "exp.yaml", CORE_API)
    trial_id, experiment_id = trial["id"], trial["experiment_id"]
    failing = cluster_api.submit(
        CORE_API / "exp.yaml", CORE_API, name="fails", entrypoint="python missing_script.py"
    )
    cluster_api.wait_trial(trial_id, lambda t: t["steps_completed"] >= 2, "two epochs")

    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    url = f"{cluster_api.url}/experiments/{experiment_id}/"
    log_in(page, url, "researcher", "researcher-password")

    # Pause: the badge turns PAUSED, and the process exits after saving a checkpoint.
    page.click("#experiment-controls button[data-action=pause]")
    page.wait_for_selector("#experiment-state .badge.state-paused", timeout=30_000)
    paused = cluster_api.wait_trial(
        trial_id,
        lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED",
        "trial process exited",
    )
    assert paused["latest_checkpoint"] is not None
    save_screenshot(page, "cluster-paused")

    # Activate: it resumes (a second run) and completes; the page follows live.
    page.click("#experiment-controls button[data-action=activate]")
    page.wait_for_selector("#experiment-state .badge.state-completed", timeout=240_000)
    done = cluster_api.trial(trial_id)
    assert done["state"] == "COMPLETED" and done["run_id"] == 2

    # The trial page's download link returns the checkpoint as a tar.
    page.goto(f"{cluster_api.url}/trials/{trial_id}/")
    link = page.locator(f"#checkpoint-{done['latest_checkpoint']} a[download]").first
    response = page.request.get(f"{cluster_api.url}{link.get_attribute('href')}")
    assert response.status == 200
    with tarfile.open(fileobj=io.BytesIO(response.body())) as archive:
        assert archive.getnames()  # the files the trial saved
    save_screenshot(page, "cluster-trial")

    # Continue trial: a new experiment and trial, and the browser lands on its page.
    page.click("#trial-controls details.continue summary")
    page.fill("#trial-controls input[name=max_length]", "3")
    page.click("#trial-controls button.btn-continue")
    page.wait_for_url(lambda u: "/trials/" in u and f"/trials/{trial_id}/" not in u)
    new_id = int(page.url.rstrip("/").split("/")[-1])
    continued = cluster_api.trial(new_id)
    assert continued["warm_start_checkpoint"] == done["latest_checkpoint"]
    save_screenshot(page, "cluster-continued")
    # Not needed further: stop it so no process outlives the test.
    cluster_api.post(f"experiments/{continued['experiment_id']}/kill")

    # A failed trial's error is at the top of its page.
    cluster_api.wait_trial(failing["id"], lambda t: t["state"] == "ERROR", "ERROR")
    page.goto(f"{cluster_api.url}/trials/{failing['id']}/")
    error = page.inner_text("#trial-error")
    assert "exited with code" in error and "missing_script.py" in error
    save_screenshot(page, "cluster-error")
