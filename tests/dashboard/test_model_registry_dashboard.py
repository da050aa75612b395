"""The dashboard's model registry: ``/models/``, ``/models/<name>/``, and "Register as model"
on the trial page's checkpoints (Django test client, real services)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from registry import model_aliases, model_registry
from registry.lifecycle import experiment_create
from registry.models import Checkpoint, CheckpointState, ModelVersion, RegisteredModel, Trial
from tests.helpers import TINY_CONFIG, TINY_MODEL, register_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_bob(db) -> Client:
    bob = get_user_model().objects.create_user("bob", password="pw-bob")
    other = Client()
    other.force_login(bob)
    return other


@pytest.fixture
def trial(alice) -> Trial:
    experiment = experiment_create(
        owner=alice, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    return experiment.trials.get()


@pytest.fixture
def ckpt(trial: Trial) -> Checkpoint:
    return register_checkpoint(trial, steps_completed=30, size=2048)


def _note(response) -> str:
    """The newest ``messages`` note of the request (older ones stay queued as the redirect
    was not followed)."""
    return [str(m) for m in get_messages(response.wsgi_request)][-1]


def _register(client: Client, ckpt: Checkpoint, model: str, trial: Trial):
    back = reverse("dashboard:trial", args=[trial.id])
    return client.post(
        reverse("dashboard:model-register"),
        {"checkpoint": str(ckpt.uuid), "model": model, "next": back},
    )


def test_every_page_requires_login(client: Client, alice, ckpt) -> None:
    model_registry.model_create(owner=alice, name="resnet")
    for url in (reverse("dashboard:models"), reverse("dashboard:model", args=["resnet"])):
        response = client.get(url)
        assert response.status_code == 302 and "/login" in response["Location"]
    response = client.post(reverse("dashboard:model-register"), {"checkpoint": str(ckpt.uuid)})
    assert response.status_code == 302 and not ModelVersion.objects.exists()


def test_every_model_route_sends_anonymous_users_to_login(client: Client, alice, ckpt) -> None:
    """Generated from the URL conf, so a new ``model*`` route without login fails here."""
    from dashboard.urls import urlpatterns

    model = model_registry.model_create(owner=alice, name="resnet")
    model_registry.version_register(model=model, user=alice, checkpoint_uuid=ckpt.uuid)
    samples = {"name": "resnet", "version": 1}
    routes = [p for p in urlpatterns if (p.name or "").startswith("model")]
    assert len(routes) == 8  # with the edit forms of models and versions
    for route in routes:
        kwargs = {key: samples[key] for key in route.pattern.converters}
        url = reverse(f"dashboard:{route.name}", kwargs=kwargs)
        for method in (client.get, client.post):
            response = method(url)
            assert response.status_code in (302, 405), (url, response.status_code)
            if response.status_code == 302:
                assert "/login" in response["Location"], url
    assert ckpt.model_versions.count() == 1 and not RegisteredModel.objects.get().archived


def test_controls_are_post_only_and_need_csrf(alice, ckpt, trial) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.get(reverse("dashboard:model-register")).status_code == 405
    denied = strict.post(
        reverse("dashboard:model-register"), {"checkpoint": str(ckpt.uuid), "model": "m"}
    )
    assert denied.status_code == 403 and not RegisteredModel.objects.exists()


def test_the_trial_page_offers_register_as_model(client_alice: Client, alice, trial, ckpt) -> None:
    model_registry.model_create(owner=alice, name="mine")
    model_registry.model_create(
        owner=get_user_model().objects.create_user("carol"), name="not-mine"
    )
    html = client_alice.get(reverse("dashboard:trial", args=[trial.id])).content.decode()
    assert f'action="{reverse("dashboard:model-register")}"' in html
    assert f'name="checkpoint" value="{ckpt.uuid}"' in html
    assert 'list="model-names"' in html and '<option value="mine">' in html
    assert "not-mine" not in html  # only models the user may register into


def test_register_creates_a_model_then_adds_versions(
    client_alice: Client, alice, trial, ckpt
) -> None:
    response = _register(client_alice, ckpt, "digits", trial)
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:trial", args=[trial.id])
    assert _note(response) == f"Registered checkpoint {ckpt.uuid} as digits version 1"
    model = RegisteredModel.objects.get(name="digits")
    assert model.owner == alice
    other = register_checkpoint(trial, steps_completed=40)
    response = _register(client_alice, other, "digits", trial)
    assert _note(response) == f"Registered checkpoint {other.uuid} as digits version 2"
    assert list(model.versions.values_list("version", flat=True)) == [2, 1]


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("", "model: This field is required."),
        ("bad name", "model: Use letters, digits"),
        ("x" * 300, "at most 256 characters"),
    ],
)
def test_register_shows_field_errors(client_alice: Client, trial, ckpt, model, why) -> None:
    response = _register(client_alice, ckpt, model, trial)
    assert response["Location"] == reverse("dashboard:trial", args=[trial.id])
    note = _note(response)
    assert note.startswith("Checkpoint not registered: ") and why in note
    assert not RegisteredModel.objects.exists()


def test_register_refusals_are_notes_and_leave_nothing_behind(
    client_alice: Client, client_bob: Client, alice, trial, ckpt
) -> None:
    Checkpoint.objects.filter(uuid=ckpt.uuid).update(state=CheckpointState.DELETED)
    note = _note(_register(client_alice, ckpt, "fresh", trial))
    assert "DELETED" in note
    assert not RegisteredModel.objects.exists()  # the new model was rolled back
    Checkpoint.objects.filter(uuid=ckpt.uuid).update(state=CheckpointState.COMPLETED)
    model_registry.model_create(owner=alice, name="alices")
    note = _note(_register(client_bob, ckpt, "alices", trial))
    assert "Only the owner of model 'alices' (alice)" in note
    model_registry.model_update(
        model=RegisteredModel.objects.get(name="alices"), user=alice, archived=True
    )
    note = _note(_register(client_alice, ckpt, "alices", trial))
    assert "archived" in note
    assert not ModelVersion.objects.exists()


def test_an_outside_next_is_not_followed(client_alice: Client, ckpt) -> None:
    response = client_alice.post(
        reverse("dashboard:model-register"),
        {"checkpoint": str(ckpt.uuid), "model": "digits", "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("dashboard:model", args=["digits"])


def test_model_pages_list_versions_with_bounded_queries(
    client_alice: Client, alice, trial, django_assert_max_num_queries
) -> None:
    model = model_registry.model_create(owner=alice, name="digits", description="CNN")
    model_registry.model_create(owner=alice, name="old")
    model_registry.model_update(
        model=RegisteredModel.objects.get(name="old"), user=alice, archived=True
    )
    checkpoints = [register_checkpoint(trial, steps_completed=10 * i) for i in range(1, 4)]
    for c in checkpoints:
        model_registry.version_register(model=model, user=alice, checkpoint_uuid=c.uuid)
    # Session, user, the user's roles (two), count, one page, the create form's workspaces.
    with django_assert_max_num_queries(7):
        listing = client_alice.get(reverse("dashboard:models"))
    html = listing.content.decode()
    assert 'id="model-digits"' in html and 'id="model-old"' not in html
    assert (
        'id="model-old"'
        in client_alice.get(reverse("dashboard:models") + "?archived=on").content.decode()
    )
    url = reverse("dashboard:model", args=["digits"])
    # The model page: its earlier six, and the user's roles in workspaces (two).
    with django_assert_max_num_queries(8):
        page = client_alice.get(url)
    html = page.content.decode()
    trial_url = reverse("dashboard:trial", args=[trial.id])
    for c in checkpoints:
        assert f'href="{trial_url}#checkpoint-{c.uuid}"' in html
        assert f'href="/api/v1/checkpoints/{c.uuid}/download"' in html
    assert html.index('id="version-3"') < html.index('id="version-1"')
    # Many more models and versions: the same number of queries.
    for i in range(40):
        model_registry.model_create(owner=alice, name=f"m{i}")
    for i in range(40):
        extra = register_checkpoint(trial, steps_completed=100 + i)
        model_registry.version_register(model=model, user=alice, checkpoint_uuid=extra.uuid)
    with django_assert_max_num_queries(7):
        client_alice.get(reverse("dashboard:models"))
    with django_assert_max_num_queries(8):
        assert client_alice.get(url).status_code == 200
    assert client_alice.get(reverse("dashboard:model", args=["nope"])).status_code == 404
    assert client_alice.get(reverse("dashboard:model", args=["bad name"])).status_code == 404


def test_owner_controls_archive_and_delete_versions(
    client_alice: Client, client_bob: Client, alice, ckpt
) -> None:
    model = model_registry.model_create(owner=alice, name="digits")
    model_registry.version_register(model=model, user=alice, checkpoint_uuid=ckpt.uuid)
    page = client_bob.get(reverse("dashboard:model", args=["digits"])).content.decode()
    assert "Archive" not in page and "btn-kill" not in page  # bob reads only
    delete = reverse("dashboard:model-version-delete", args=["digits", 1])
    note = _note(client_bob.post(delete))
    assert "Only the owner" in note and ckpt.model_versions.count() == 1
    archive = reverse("dashboard:model-archive", args=["digits"])
    note = _note(client_alice.post(archive, {"archived": "true"}))
    assert note == "Model digits archived" and RegisteredModel.objects.get().archived
    note = _note(client_alice.post(archive, {"archived": "maybe"}))
    assert note.startswith("archived:")
    note = _note(client_alice.post(delete))
    assert note == "Deleted digits version 1" and ckpt.model_versions.count() == 0


def test_the_create_form(client_alice: Client) -> None:
    response = client_alice.post(
        reverse("dashboard:model-create"), {"name": "digits", "description": "CNN"}
    )
    assert response["Location"] == reverse("dashboard:model", args=["digits"])
    again = client_alice.post(reverse("dashboard:model-create"), {"name": "digits"})
    assert again["Location"] == reverse("dashboard:models")
    assert "already exists" in _note(again)
    bad = client_alice.post(reverse("dashboard:model-create"), {"name": "a b"})
    assert "name: Use letters" in _note(bad)
    html = client_alice.get(reverse("dashboard:models")).content.decode()
    assert f'href="{reverse("dashboard:models")}"' in html  # the nav link


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_register_as_model_in_chromium(live_server, chromium) -> None:
    from tests.browser import assert_accessible, log_in, save_screenshot

    owner = get_user_model().objects.create_user("rita", password="pw-rita")
    experiment = experiment_create(
        owner=owner, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    trial = experiment.trials.get()
    ckpt = register_checkpoint(trial, steps_completed=30, size=2048)
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, f"{live_server.url}/trials/{trial.id}/", "rita", "pw-rita")
    row = f"#checkpoint-{ckpt.uuid}"
    page.fill(f"{row} input[name=model]", "digits-classifier")
    page.click(f"{row} button:has-text('Register as model')")
    page.wait_for_selector(".messages")
    [version] = ModelVersion.objects.filter(model__name="digits-classifier")
    assert version.checkpoint_id == ckpt.uuid and version.version == 1
    page.goto(f"{live_server.url}/models/digits-classifier/")
    assert str(ckpt.uuid) in page.inner_text("main")
    assert_accessible(page)
    save_screenshot(page, "model")
    page.goto(f"{live_server.url}/models/")
    assert_accessible(page)
    save_screenshot(page, "models")


def test_the_model_page_shows_each_versions_aliases(client_alice: Client, alice, ckpt) -> None:
    model = model_registry.model_create(owner=alice, name="digits")
    for _ in range(2):
        model_registry.version_register(model=model, user=alice, checkpoint_uuid=ckpt.uuid)
    model_aliases.alias_set(model=model, alias="staging", version=2, user=alice)
    model_aliases.alias_set(model=model, alias="champion", version=2, user=alice)
    html = client_alice.get(reverse("dashboard:model", args=["digits"])).content.decode()
    row = html.split('id="version-2"')[1].split("</tr>")[0]
    assert row.index("@champion") < row.index("@staging")
    assert "@" not in html.split('id="version-1"')[1].split("</td>")[0]
