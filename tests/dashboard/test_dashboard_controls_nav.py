"""Where dashboard controls lead: ``next``, continue → new trial page, confirmations."""

from __future__ import annotations

import html
import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from registry.lifecycle import experiment_create
from registry.models import Experiment, State, Trial
from tests.helpers import make_tar_gz, register_checkpoint

CONFIG = (
    "name: nav\nentrypoint: python train.py\n"
    "hyperparameters: {lr: 0.1}\n"
    "searcher: {name: single, metric: loss, max_length: 10}\n"
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_alice(client: Client, db) -> Client:
    client.force_login(get_user_model().objects.create_user("alice", password="pw"))
    return client


@pytest.fixture
def trial(client_alice: Client) -> Trial:
    """The one trial of a real experiment; its run stays QUEUED (no worker)."""
    user = get_user_model().objects.get(username="alice")
    experiment = experiment_create(
        owner=user, config_source=CONFIG, model_definition=make_tar_gz({"train.py": "pass\n"})
    )
    return experiment.trials.get()


def _checkpoint(trial: Trial, steps: int) -> uuid.UUID:
    return register_checkpoint(trial, steps_completed=steps, run_id=None, size=10).uuid


def _redirected_to(response) -> str:
    [(url, status)] = response.redirect_chain
    assert status == 302
    return url


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


def _confirm_texts(page: str) -> dict[str, str]:
    """``{form action: its data-confirm text}`` for every form that asks first."""
    found = re.findall(r'<form [^>]*action="([^"]+)"[^>]*data-confirm="([^"]*)"', page)
    return {action: html.unescape(text) for action, text in found}


def _trial_page(trial: Trial) -> str:
    return reverse("dashboard:trial", args=[trial.id])


def _row_menu(trial: Trial) -> str:
    """The trials table's row menu of ``trial`` (fetched by the experiment page on demand)."""
    return reverse("dashboard:trial-menu", args=[trial.id])


def _experiment_page(trial: Trial) -> str:
    return reverse("dashboard:experiment", args=[trial.experiment_id])


def test_continue_lands_on_the_new_trials_page(client_alice: Client, trial: Trial) -> None:
    _checkpoint(trial, 10)
    client_alice.post(reverse("dashboard:trial-control", args=[trial.id, "pause"]), follow=True)
    response = client_alice.post(
        reverse("dashboard:trial-continue", args=[trial.id]),
        {"checkpoint": "", "max_length": "", "hparams": "lr=0.5", "next": _trial_page(trial)},
        follow=True,
    )
    new_trial = Trial.objects.exclude(experiment_id=trial.experiment_id).get()
    assert _redirected_to(response) == reverse("dashboard:trial", args=[new_trial.id])
    assert response.status_code == 200
    [(level, text)] = _messages(response)
    assert level == "success" and f"Created trial {new_trial.id}" in text
    page = response.content.decode()
    assert f"<h1>Trial {new_trial.id}</h1>" in page and text in page
    assert new_trial.hparams == {"lr": 0.5}


def test_a_bad_continue_form_keeps_its_values_and_errors_on_the_page(
    client_alice: Client, trial: Trial
) -> None:
    _checkpoint(trial, 10)
    client_alice.post(reverse("dashboard:trial-control", args=[trial.id, "pause"]), follow=True)
    response = client_alice.post(
        reverse("dashboard:trial-continue", args=[trial.id]),
        {"max_length": "0", "hparams": "lr", "next": _trial_page(trial)},
        follow=True,
    )
    assert _redirected_to(response) == _trial_page(trial)  # the page it was posted from
    [(level, text)] = _messages(response)
    assert level == "error" and "max_length (batches)" in text
    page = response.content.decode()
    assert '<details class="continue" open>' in page  # the form is shown again...
    assert 'name="max_length" min="1" placeholder="unchanged" value="0"' in page  # ...as typed
    assert ">lr</textarea>" in page
    assert page.count('class="field-error"') == 2  # one error under each bad field
    assert "NAME=VALUE" in page
    assert Experiment.objects.count() == 1
    # Shown once: the next visit has a fresh, closed form.
    again = client_alice.get(_trial_page(trial)).content.decode()
    assert '<details class="continue">' in again and "field-error" not in again

    # From the experiment page it goes back there (no `next`: the experiment page too).
    url = reverse("dashboard:trial-continue", args=[trial.id])
    back = f"{_experiment_page(trial)}#trial-{trial.id}"
    response = client_alice.post(url, {"hparams": "lr", "next": back}, follow=True)
    assert _redirected_to(response) == back
    # The page opens the row's menu (#trial-N), which shows the form again.
    assert '<details class="continue" open>' in client_alice.get(_row_menu(trial)).content.decode()


def test_controls_go_back_to_a_safe_next(client_alice: Client, trial: Trial) -> None:
    pause = reverse("dashboard:trial-control", args=[trial.id, "pause"])
    response = client_alice.post(pause, {"next": _trial_page(trial)}, follow=True)
    assert _redirected_to(response) == _trial_page(trial)
    assert _messages(response) == [("success", f"Trial {trial.id}: PAUSED")]
    assert f"Trial {trial.id}: PAUSED" in response.content.decode()

    activate = reverse("dashboard:experiment-control", args=[trial.experiment_id, "activate"])
    response = client_alice.post(activate, {"next": _trial_page(trial)})
    assert response.status_code == 302 and response["Location"] == _trial_page(trial)
    trial.refresh_from_db()
    assert trial.state == State.ACTIVE


@pytest.mark.parametrize(
    "unsafe",
    [
        "https://evil.example/trials/1/",
        "//evil.example/trials/1/",
        "http://testserver.evil.example/",
        "javascript:alert(1)",
        "trials/1/",
        "/\\evil.example/",
        "",
    ],
)
def test_controls_ignore_an_outside_next(client_alice: Client, trial: Trial, unsafe: str) -> None:
    for url in (
        reverse("dashboard:trial-control", args=[trial.id, "pause"]),
        reverse("dashboard:experiment-control", args=[trial.experiment_id, "activate"]),
        reverse("dashboard:trial-continue", args=[trial.id]),  # refused: ACTIVE
    ):
        response = client_alice.post(url, {"next": unsafe})
        assert response.status_code == 302
        assert response["Location"] == _experiment_page(trial)


def test_forms_post_the_page_they_are_on_as_next(client_alice: Client, trial: Trial) -> None:
    trial_page = client_alice.get(_trial_page(trial)).content.decode()
    assert trial_page.count(f'name="next" value="{_trial_page(trial)}"') == len(
        re.findall(r'<form method="post" class="control"', trial_page)
    )
    experiment_page = client_alice.get(_experiment_page(trial)).content.decode()
    menu = client_alice.get(_row_menu(trial)).content.decode()
    assert f'name="next" value="{_experiment_page(trial)}#trial-{trial.id}"' in menu
    assert f'name="next" value="{_experiment_page(trial)}"' in experiment_page
    # The live fragments (rendered by the live endpoint) still name the experiment page.
    live = client_alice.get(reverse("dashboard:experiment-live", args=[trial.experiment_id]))
    data = live.json()
    assert _row_menu(trial) in data["trials_html"]
    assert f'name="next" value="{_experiment_page(trial)}"' in data["controls_html"]
    assert "/live" not in data["trials_html"] + data["controls_html"]


def test_kill_confirmation_says_what_survives(client_alice: Client, trial: Trial) -> None:
    kill = reverse("dashboard:trial-control", args=[trial.id, "kill"])
    for page in (_trial_page(trial), _row_menu(trial)):
        text = _confirm_texts(client_alice.get(page).content.decode())[kill]
        assert "stops at once" in text and "from scratch" in text
        assert "without a checkpoint" not in text

    _checkpoint(trial, 5)
    _checkpoint(trial, 40)
    for page in (_trial_page(trial), _row_menu(trial)):
        text = _confirm_texts(client_alice.get(page).content.decode())[kill]
        assert "latest checkpoint at step 40" in text and "from scratch" not in text

    exp_kill = reverse("dashboard:experiment-control", args=[trial.experiment_id, "kill"])
    text = _confirm_texts(client_alice.get(_experiment_page(trial)).content.decode())[exp_kill]
    assert "stops at once" in text and "latest checkpoint" in text


def test_cancel_asks_for_confirmation(client_alice: Client, trial: Trial) -> None:
    cancel = reverse("dashboard:trial-control", args=[trial.id, "cancel"])
    exp_cancel = reverse("dashboard:experiment-control", args=[trial.experiment_id, "cancel"])
    trial_page = client_alice.get(_trial_page(trial)).content.decode()
    assert f"Cancel trial {trial.id}?" in _confirm_texts(trial_page)[cancel]
    experiment_page = client_alice.get(_experiment_page(trial)).content.decode()
    texts = _confirm_texts(experiment_page)
    menu = client_alice.get(_row_menu(trial)).content.decode()
    assert f"Cancel trial {trial.id}?" in _confirm_texts(menu)[cancel]
    assert f"Cancel experiment {trial.experiment_id}?" in texts[exp_cancel]
    # The dialog is wired to the submit by static/js/confirm.js (no inline handler: CSP).
    forms = re.findall(r"<form [^>]*data-confirm=[^>]*>", experiment_page)
    assert forms and "js/confirm.js" in experiment_page
    # Pause and Activate do not ask.
    pause = reverse("dashboard:trial-control", args=[trial.id, "pause"])
    assert pause in menu and pause not in _confirm_texts(menu)


def test_the_experiment_page_has_the_live_banner(client_alice: Client, trial: Trial) -> None:
    page = client_alice.get(_experiment_page(trial)).content.decode()
    login = reverse("login") + "?next=" + _experiment_page(trial).replace("/", "%2F")
    assert '<div id="live-banner" class="message message-error" role="alert" hidden' in page
    assert f'data-login-url="{login}"' in page


def test_a_refused_continue_leaves_no_form_behind(client_alice: Client, trial: Trial) -> None:
    _checkpoint(trial, 10)
    url = reverse("dashboard:trial-continue", args=[trial.id])
    response = client_alice.post(url, {"hparams": "lr=1", "next": _trial_page(trial)}, follow=True)
    [(level, text)] = _messages(response)  # refused: the trial is ACTIVE
    assert level == "error" and "is ACTIVE" in text
    # Once the trial can be continued, its form starts fresh (no stale values or errors).
    page = client_alice.post(
        reverse("dashboard:trial-control", args=[trial.id, "pause"]),
        {"next": _trial_page(trial)},
        follow=True,
    ).content.decode()
    assert '<details class="continue">' in page and "lr=1" not in page
