"""Editing in the dashboard and over REST: experiment name / description / labels / notes, trial
notes, model description / labels, version comment / labels.

Django test client and DRF's client against the real services (registry.lifecycle,
registry.model_registry); each edit as the owner, as an admin, as another user (403, nothing
changed), with bad input (400 naming the field, nothing changed); Markdown sanitising.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from dashboard.notes import render_markdown
from registry import model_registry
from registry.lifecycle import experiment_create
from registry.models import Experiment, ModelVersion, RegisteredModel, State, Trial
from tests.helpers import TINY_CONFIG, TINY_MODEL, register_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(alice) -> Experiment:
    return experiment_create(owner=alice, config_source=TINY_CONFIG, model_definition=TINY_MODEL)


@pytest.fixture
def trial(experiment) -> Trial:
    return experiment.trials.get()


@pytest.fixture
def model(alice, trial) -> RegisteredModel:
    created = model_registry.model_create(owner=alice, name="resnet", description="old")
    checkpoint = register_checkpoint(trial, steps_completed=10, size=10)
    model_registry.version_register(
        model=created, user=alice, checkpoint_uuid=checkpoint.uuid, comment="first"
    )
    return created


def _login(username: str, *, staff: bool = False) -> Client:
    user = get_user_model().objects.create_user(username, password="pw", is_staff=staff)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def client_bob(db) -> Client:
    return _login("bob")


@pytest.fixture
def client_admin(db) -> Client:
    return _login("root", staff=True)


def _api_as(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def _fields(obj) -> dict:
    obj.refresh_from_db()
    names = ("name", "description", "labels", "notes", "comment")
    return {n: getattr(obj, n) for n in names if hasattr(obj, n)}


# -- experiments --------------------------------------------------------------------------------


def test_owner_edits_experiment_name_description_labels(client_alice, experiment) -> None:
    url = reverse("dashboard:experiment-edit", args=[experiment.id])
    page = reverse("dashboard:experiment", args=[experiment.id])
    response = client_alice.post(
        url,
        {"name": " resnet sweep ", "description": "lr 1e-3", "labels": "a, b,, a ,c", "next": page},
    )
    assert response.status_code == 302 and response["Location"] == page
    assert _fields(experiment) | {"notes": ""} == {
        "name": "resnet sweep",
        "description": "lr 1e-3",
        "labels": ["a", "b", "c"],
        "notes": "",
    }
    html = client_alice.get(page).content.decode()
    assert "resnet sweep" in html and 'id="experiment-edit"' in html
    assert 'value="a, b, c"' in html


def test_admin_edits_someone_elses_experiment(client_admin, experiment) -> None:
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    response = client_admin.post(url, {"notes": "checked by admin"})
    assert response.status_code == 302
    assert _fields(experiment)["notes"] == "checked by admin"


@pytest.mark.parametrize(
    ("route", "data"),
    [
        ("dashboard:experiment-edit", {"name": "stolen", "description": "", "labels": ""}),
        ("dashboard:experiment-notes", {"notes": "stolen"}),
    ],
)
def test_other_user_gets_403_and_nothing_changes(client_bob, experiment, route, data) -> None:
    before = _fields(experiment)
    url = reverse(route, args=[experiment.id])
    assert client_bob.get(url).status_code == 403
    assert client_bob.post(url, data).status_code == 403
    assert _fields(experiment) == before
    page = client_bob.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    assert 'id="experiment-edit"' not in page and 'id="notes-edit"' not in page
    assert 'id="notes"' in page  # the notes themselves are for everyone


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"name": "   ", "description": "", "labels": ""}, "name", "Must not be empty"),
        ({"name": "x" * 257, "description": "", "labels": ""}, "name", "at most 256"),
        ({"name": "ok", "description": "d" * 10_001, "labels": ""}, "description", "10,000"),
        ({"name": "ok", "description": "", "labels": "x" * 257}, "labels", "longer than 256"),
        ({"name": "ok", "description": "", "labels": "bad\x07bell"}, "labels", "control"),
        ({"name": "tab\tname", "description": "", "labels": ""}, "name", "line breaks"),
    ],
)
def test_bad_input_names_the_field_and_saves_nothing(
    client_alice, experiment, data, field, words
) -> None:
    before = _fields(experiment)
    response = client_alice.post(reverse("dashboard:experiment-edit", args=[experiment.id]), data)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and words in " ".join(errors[field]), errors
    html = response.content.decode()
    assert f"{field}: " in html and 'role="alert"' in html  # shown on the form, by field
    assert _fields(experiment) == before


def test_every_bad_field_is_reported_at_once(client_alice, experiment) -> None:
    data = {"name": "", "description": "d" * 10_001, "labels": "x" * 300}
    response = client_alice.post(reverse("dashboard:experiment-edit", args=[experiment.id]), data)
    assert response.status_code == 400
    assert set(response.context["form"].errors) == {"name", "description", "labels"}


def test_edit_page_get_shows_the_form_with_current_values(client_alice, experiment) -> None:
    response = client_alice.get(reverse("dashboard:experiment-edit", args=[experiment.id]))
    assert response.status_code == 200
    assert response.context["form"].initial["name"] == experiment.name


def test_an_experiment_being_deleted_takes_no_edits(client_alice, experiment) -> None:
    Experiment.objects.filter(id=experiment.id).update(state=State.DELETING)
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    response = client_alice.post(url, {"notes": "late"}, follow=True)
    assert "being deleted" in response.content.decode()
    assert _fields(experiment)["notes"] == ""


def test_next_outside_the_site_is_not_followed(client_alice, experiment) -> None:
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    response = client_alice.post(url, {"notes": "x", "next": "https://evil.example/"})
    assert response["Location"] == reverse("dashboard:experiment", args=[experiment.id]) + "#notes"


def test_forms_need_csrf(alice, experiment) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(
        reverse("dashboard:experiment-notes", args=[experiment.id]), {"notes": "x"}
    )
    assert response.status_code == 403
    assert _fields(experiment)["notes"] == ""


# -- trial notes --------------------------------------------------------------------------------


def test_trial_notes_owner_admin_other(client_alice, client_admin, client_bob, trial) -> None:
    url = reverse("dashboard:trial-notes", args=[trial.id])
    page = reverse("dashboard:trial", args=[trial.id])
    assert client_alice.post(url, {"notes": "**lr** too high"}).status_code == 302
    html = client_alice.get(page).content.decode()
    assert "<strong>lr</strong> too high" in html and 'id="notes-edit"' in html
    assert client_admin.post(url, {"notes": "admin note"}).status_code == 302
    assert _fields(trial)["notes"] == "admin note"
    assert client_bob.post(url, {"notes": "bob"}).status_code == 403
    assert _fields(trial)["notes"] == "admin note"
    assert 'id="notes-edit"' not in client_bob.get(page).content.decode()
    too_long = client_alice.post(url, {"notes": "n" * 100_001})
    assert too_long.status_code == 400 and "notes" in too_long.context["form"].errors
    assert _fields(trial)["notes"] == "admin note"


# -- Markdown -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("<script>alert(1)</script>hi", ["<script", "alert(1)"]),
        ('<img src="x" onerror="alert(1)">', ["onerror", "<img"]),
        ("[click](javascript:alert(1))", ['href="javascript:']),  # left as text
        ('<a href="javascript:alert(1)">x</a>', ["javascript:"]),
        ('<p onclick="steal()" style="x">p</p>', ["onclick", "style="]),
        ("<iframe src='https://e.com'></iframe>", ["<iframe"]),
        ("<svg><script>alert(1)</script></svg>", ["<svg", "<script"]),
    ],
)
def test_markdown_is_sanitised(text: str, absent: list[str]) -> None:
    html = str(render_markdown(text))
    for bad in absent:
        assert bad not in html, html


def test_markdown_formats_and_links_get_noopener() -> None:
    html = str(render_markdown("# T\n\n*a* `b`\n\n- one\n- two\n\n[site](https://example.com)"))
    assert "<h1>T</h1>" in html and "<em>a</em>" in html and "<code>b</code>" in html
    assert "<li>one</li>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer">site</a>' in html


def test_notes_on_the_page_are_sanitised(client_alice, experiment) -> None:
    url = reverse("dashboard:experiment-notes", args=[experiment.id])
    client_alice.post(url, {"notes": "ok <script>alert('x')</script> [l](javascript:alert(2))"})
    html = client_alice.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    notes = html[html.index('id="notes-body"') : html.index('id="notes-edit"')]
    assert "<script" not in notes and 'href="javascript:' not in notes and "ok" in notes


# -- models -------------------------------------------------------------------------------------


def test_model_description_and_labels(client_alice, client_admin, client_bob, model) -> None:
    url = reverse("dashboard:model-edit", args=[model.name])
    page = reverse("dashboard:model", args=[model.name])
    response = client_alice.post(url, {"description": "new", "labels": "prod, vision"})
    assert response.status_code == 302 and response["Location"] == page
    assert _fields(model) == {"name": "resnet", "description": "new", "labels": ["prod", "vision"]}
    assert client_admin.post(url, {"description": "adm", "labels": ""}).status_code == 302
    assert _fields(model) == {"name": "resnet", "description": "adm", "labels": []}
    assert client_bob.post(url, {"description": "bob", "labels": "x"}).status_code == 403
    assert _fields(model) == {"name": "resnet", "description": "adm", "labels": []}
    assert 'id="model-edit"' not in client_bob.get(page).content.decode()
    assert 'id="model-edit"' in client_alice.get(page).content.decode()
    bad = client_alice.post(url, {"description": "d" * 10_001, "labels": "ok"})
    assert bad.status_code == 400 and "description" in bad.context["form"].errors
    assert _fields(model) == {"name": "resnet", "description": "adm", "labels": []}


def test_version_comment(client_alice, client_admin, client_bob, model) -> None:
    url = reverse("dashboard:model-version-edit", args=[model.name, 1])
    version = ModelVersion.objects.get(model=model, version=1)
    assert client_alice.post(url, {"comment": "best so far", "labels": "prod"}).status_code == 302
    assert (_fields(version)["comment"], version.labels) == ("best so far", ["prod"])
    assert client_admin.post(url, {"comment": "by admin", "labels": ""}).status_code == 302
    assert _fields(version)["comment"] == "by admin"
    assert client_bob.post(url, {"comment": "bob", "labels": ""}).status_code == 403
    assert _fields(version)["comment"] == "by admin"
    bad = client_alice.post(url, {"comment": "c\x00", "labels": ""})
    assert bad.status_code == 400 and "comment" in bad.context["form"].errors
    page = client_alice.get(reverse("dashboard:model", args=[model.name])).content.decode()
    assert "by admin" in page and 'id="version-1-edit"' in page
    assert (
        client_alice.get(reverse("dashboard:model-version-edit", args=[model.name, 9])).status_code
        == 404
    )


# -- REST API -----------------------------------------------------------------------------------


def test_api_patch_experiment_as_owner_admin_other(alice, experiment) -> None:
    url = f"/api/v1/experiments/{experiment.id}/"
    owner = _api_as(alice)
    answer = owner.patch(
        url, {"name": "n2", "labels": ["x", "x", "y"], "notes": "# hi"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["labels"] == ["x", "y"] and answer.json()["notes"] == "# hi"
    admin = _api_as(get_user_model().objects.create_user("root", is_staff=True))
    assert admin.patch(url, {"description": "d"}, format="json").status_code == 200
    other = _api_as(get_user_model().objects.create_user("bob"))
    before = _fields(experiment)
    assert other.patch(url, {"name": "stolen"}, format="json").status_code == 403
    assert (
        _fields(experiment)
        == before
        == {
            "name": "n2",
            "description": "d",
            "labels": ["x", "y"],
            "notes": "# hi",
        }
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"labels": ["a,b"]}, "labels.0"),
        ({"labels": [f"l{i}" for i in range(101)]}, "labels"),
        ({"notes": "n" * 100_001}, "notes"),
        ({"notes": 3}, "notes"),
        ({"state": "COMPLETED"}, "state"),
    ],
)
def test_api_patch_experiment_bad_input(alice, experiment, body, field) -> None:
    before = _fields(experiment)
    answer = _api_as(alice).patch(f"/api/v1/experiments/{experiment.id}/", body, format="json")
    assert answer.status_code == 400 and field in answer.json()["errors"], answer.content
    assert _fields(experiment) == before


def test_api_patch_trial_notes(alice, trial) -> None:
    url = f"/api/v1/trials/{trial.id}/"
    answer = _api_as(alice).patch(url, {"notes": "trial note"}, format="json")
    assert answer.status_code == 200 and answer.json()["notes"] == "trial note"
    other = _api_as(get_user_model().objects.create_user("bob"))
    assert other.patch(url, {"notes": "x"}, format="json").status_code == 403
    bad = _api_as(alice).patch(url, {"notes": "x", "hparams": {}}, format="json")
    assert bad.status_code == 400 and "hparams" in bad.json()["errors"]
    assert _fields(trial)["notes"] == "trial note"


def test_api_model_labels_follow_the_same_rule(alice, model) -> None:
    answer = _api_as(alice).patch("/api/v1/models/resnet/", {"labels": ["a,b"]}, format="json")
    assert answer.status_code == 400 and "labels.0" in answer.json()["errors"]
