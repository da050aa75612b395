"""Dashboard control forms: pause/activate/cancel/kill/archive and "Continue trial" (test client)."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.urls import reverse

from registry.models import Experiment, RunState, State, Trial
from tests.helpers import queued_experiment, register_checkpoint

CONFIG = (
    "name: controls\nentrypoint: python train.py\n"
    "hyperparameters: {lr: 0.1, optimizer: {name: sgd, momentum: 0.9}}\n"
    "searcher: {name: single, metric: loss, max_length: 10}\n"
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(alice) -> Experiment:
    """A real single-trial experiment whose run 1 is QUEUED (no worker ever claims it)."""
    return queued_experiment(
        owner=alice,
        config_source=CONFIG,
    )


@pytest.fixture
def trial(experiment: Experiment) -> Trial:
    trial = experiment.trials.get()
    assert trial.runs.get().state == RunState.QUEUED
    return trial


def _messages(response) -> list[tuple[str, str]]:
    """The notes the page after the redirect shows (``follow=True`` responses)."""
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


def _redirected_to(response) -> str:
    [(url, status)] = response.redirect_chain
    assert status == 302
    return url


def _trial_url(trial: Trial, action: str) -> str:
    return reverse("dashboard:trial-control", args=[trial.id, action])


def _menu_url(trial: Trial) -> str:
    """The experiment page's row menu of ``trial``, fetched when its Actions button is pressed."""
    return reverse("dashboard:trial-menu", args=[trial.id])


def test_pause_a_queued_trial_redirects_with_a_success_message(
    client_alice: Client, trial: Trial
) -> None:
    response = client_alice.post(_trial_url(trial, "pause"), follow=True)
    assert _redirected_to(response) == reverse("dashboard:experiment", args=[trial.experiment_id])
    assert _messages(response) == [("success", f"Trial {trial.id}: PAUSED")]
    trial.refresh_from_db()
    assert trial.state == State.PAUSED
    assert Experiment.objects.get(id=trial.experiment_id).state == State.PAUSED

    # The page shows the note, the PAUSED badge, and the row's menu now Activate, not Pause.
    page = response.content.decode()
    assert f"Trial {trial.id}: PAUSED" in page and "badge state-paused" in page
    menu = client_alice.get(_menu_url(trial)).content.decode()
    assert _trial_url(trial, "activate") in menu
    assert _trial_url(trial, "pause") not in menu
    # A note is shown once.
    again = client_alice.get(response.redirect_chain[0][0])
    assert f"Trial {trial.id}: PAUSED" not in again.content.decode()


def test_an_illegal_action_is_an_error_message_and_changes_nothing(
    client_alice: Client, trial: Trial
) -> None:
    response = client_alice.post(_trial_url(trial, "activate"), follow=True)  # ACTIVE: no-op
    assert _messages(response) == [("success", f"Trial {trial.id}: ACTIVE")]
    client_alice.post(_trial_url(trial, "kill"), follow=True)
    response = client_alice.post(_trial_url(trial, "pause"), follow=True)
    assert response.status_code == 200
    errors = [text for level, text in _messages(response) if level == "error"]
    assert errors == [f"trial {trial.id} is CANCELED; it can be paused only when ACTIVE"]
    assert "CANCELED; it can be paused" in response.content.decode()
    trial.refresh_from_db()
    assert trial.state == State.CANCELED


def test_experiment_controls_and_archive(client_alice: Client, experiment: Experiment) -> None:
    def post(action: str):
        url = reverse("dashboard:experiment-control", args=[experiment.id, action])
        return client_alice.post(url, follow=True)

    assert _messages(post("pause")) == [("success", f"Experiment {experiment.id}: PAUSED")]
    assert _messages(post("activate")) == [("success", f"Experiment {experiment.id}: ACTIVE")]
    response = post("archive")  # not ended yet
    assert _messages(response)[0][0] == "error"
    assert "can be archived only when COMPLETED" in _messages(response)[0][1]
    assert _messages(post("kill")) == [("success", f"Experiment {experiment.id}: CANCELED")]
    assert _messages(post("archive")) == [
        ("success", f"Experiment {experiment.id}: CANCELED (archived)")
    ]
    experiment.refresh_from_db()
    assert (experiment.state, experiment.archived) == (State.CANCELED, True)
    page = client_alice.get(reverse("dashboard:experiment", args=[experiment.id])).content
    assert (
        reverse("dashboard:experiment-control", args=[experiment.id, "unarchive"]).encode() in page
    )
    assert b"data-confirm=" not in page  # no Kill button once it ended


def test_the_page_offers_only_legal_controls(client_alice: Client, experiment: Experiment) -> None:
    page = client_alice.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    for action in ("pause", "cancel", "kill"):
        assert reverse("dashboard:experiment-control", args=[experiment.id, action]) in page
    for action in ("activate", "archive", "unarchive"):
        assert reverse("dashboard:experiment-control", args=[experiment.id, action]) not in page
    assert "data-confirm=" in page  # Kill asks first (static/js/confirm.js)
    assert "Continue trial" not in page  # ACTIVE, and no checkpoint


def test_live_json_carries_the_controls(client_alice: Client, trial: Trial) -> None:
    url = reverse("dashboard:experiment-live", args=[trial.experiment_id])
    client_alice.post(_trial_url(trial, "pause"), follow=True)
    data = client_alice.get(url).json()
    assert _menu_url(trial) in data["trials_html"]
    menu = client_alice.get(_menu_url(trial)).content.decode()
    assert _trial_url(trial, "activate") in menu  # the row menu, fetched on demand
    activate = reverse("dashboard:experiment-control", args=[trial.experiment_id, "activate"])
    assert activate in data["controls_html"]
    assert "csrfmiddlewaretoken" in data["controls_html"]
    unchanged = client_alice.get(url, {"since": data["updated"]}).json()
    assert unchanged["controls_html"] is None


def test_get_is_405_unknown_action_404_and_anonymous_redirects_to_login(
    client: Client, alice, trial: Trial
) -> None:
    response = client.post(_trial_url(trial, "pause"))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    client.force_login(alice)
    assert client.get(_trial_url(trial, "pause")).status_code == 405
    assert client.get(reverse("dashboard:trial-continue", args=[trial.id])).status_code == 405
    assert client.post(_trial_url(trial, "delete")).status_code == 404
    bad = reverse("dashboard:experiment-control", args=[trial.experiment_id, "archive_all"])
    assert client.post(bad).status_code == 404
    assert (
        client.post(reverse("dashboard:trial-control", args=[999999, "pause"])).status_code == 404
    )
    trial.refresh_from_db()
    assert trial.state == State.ACTIVE


def test_csrf_is_enforced(alice, trial: Trial) -> None:
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(_trial_url(trial, "pause")).status_code == 403
    trial.refresh_from_db()
    assert trial.state == State.ACTIVE
    # With the token from the page's form, the same POST goes through.
    csrf_client.get(reverse("dashboard:experiment", args=[trial.experiment_id]))
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(_trial_url(trial, "pause"), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    trial.refresh_from_db()
    assert trial.state == State.PAUSED


def _checkpoint(trial: Trial, steps: int) -> uuid.UUID:
    return register_checkpoint(trial, steps_completed=steps, run_id=None, size=10).uuid


def test_continue_trial_creates_the_experiment_and_redirects_to_it(
    client_alice: Client, trial: Trial
) -> None:
    first = _checkpoint(trial, 5)
    latest = _checkpoint(trial, 10)
    client_alice.post(_trial_url(trial, "pause"), follow=True)
    html = client_alice.get(_menu_url(trial)).content.decode()
    assert "Continue trial" in html
    assert f'<option value="{latest}" selected>' in html

    response = client_alice.post(
        reverse("dashboard:trial-continue", args=[trial.id]),
        {"checkpoint": str(first), "max_length": "20", "hparams": "lr=0.5\noptimizer.momentum=0.5"},
        follow=True,
    )
    new = Experiment.objects.exclude(id=trial.experiment_id).get()
    new_trial = new.trials.get()
    # Lands on the new trial's page (was: the new experiment's page).
    assert _redirected_to(response) == reverse("dashboard:trial", args=[new_trial.id])
    assert _messages(response) == [
        (
            "success",
            f"Created trial {new_trial.id} in experiment {new.id} (continues trial {trial.id})",
        )
    ]
    assert new_trial.warm_start_checkpoint == first
    assert new_trial.hparams == {"lr": 0.5, "optimizer": {"name": "sgd", "momentum": 0.5}}
    assert new.config["searcher"]["max_length"] == {"batches": 20}
    # The new experiment's page links back to the trial it continues.
    new_page = client_alice.get(reverse("dashboard:experiment", args=[new.id])).content.decode()
    assert f'#trial-{trial.id}">trial {trial.id}</a>' in new_page

    # Empty fields: the latest checkpoint, hparams and max_length unchanged.
    client_alice.post(
        reverse("dashboard:trial-continue", args=[trial.id]),
        {"checkpoint": "", "max_length": "", "hparams": ""},
    )
    newest = Experiment.objects.order_by("-id").first().trials.get()
    assert newest.warm_start_checkpoint == latest
    assert newest.hparams == trial.hparams


def test_continue_trial_errors_are_messages(client_alice: Client, trial: Trial) -> None:
    url = reverse("dashboard:trial-continue", args=[trial.id])
    back = reverse("dashboard:experiment", args=[trial.experiment_id])
    response = client_alice.post(url, {"hparams": "lr"}, follow=True)
    assert _redirected_to(response) == back
    assert "NAME=VALUE" in _messages(response)[0][1]
    response = client_alice.post(url, {"max_length": "0"}, follow=True)
    assert "max_length (batches)" in _messages(response)[0][1]
    # The lifecycle refuses: still ACTIVE.
    response = client_alice.post(url, {}, follow=True)
    [(level, text)] = _messages(response)
    assert (level, _redirected_to(response)) == ("error", back)
    assert "is ACTIVE; it can be continued only when" in text
    assert Experiment.objects.count() == 1


def test_the_experiment_tables_continue_form_offers_the_newest_checkpoints_only(
    client_alice: Client, trial: Trial
) -> None:
    from dashboard.templatetags.control_tags import TABLE_CONTINUE_CHOICES

    total = TABLE_CONTINUE_CHOICES + 5
    uuids = [_checkpoint(trial, steps) for steps in range(1, total + 1)]
    client_alice.post(_trial_url(trial, "pause"))
    html = client_alice.get(_menu_url(trial)).content.decode()  # the table's row menu
    offered = [u for u in uuids if f'<option value="{u}"' in html]
    assert offered == uuids[-TABLE_CONTINUE_CHOICES:]  # the newest, latest selected
    assert f'<option value="{uuids[-1]}" selected>' in html
    assert "5 older checkpoints: on the" in html
    page = client_alice.get(reverse("dashboard:trial", args=[trial.id])).content.decode()
    assert all(f'<option value="{u}"' in page for u in uuids)
    assert "older checkpoint" not in page
