"""Who may register a checkpoint as a model version: the owner of its experiment or an admin.
A version keeps its checkpoint from being deleted, so a user who could register anyone's
checkpoint in a model of their own could block its owner's deletion (only an admin could undo
it). REST (``POST models/{name}/versions/``) and the dashboard's "Register as model" form, against
the real services and storage."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from headway.storage import build_storage_manager
from registry.models import CheckpointState, ModelVersion, RegisteredModel
from tests.helpers import reload
from tests.helpers_checkpoints import retention_experiment, stored_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(tmp_path) -> dict:
    # Retention keeps everything here: the tests delete by hand.
    return {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"), "save_trial_latest": 100}


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def bob_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def checkpoint(api, storage):
    """alice's stored checkpoint (``api`` is alice's client); not her trial's newest, which
    the trial may still resume from (so its deletion would be refused for that reason)."""
    trial = retention_experiment(api, storage)
    older = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    return older


def test_another_user_may_not_pin_someone_elses_checkpoint_in_their_model(
    api, bob_user, checkpoint
) -> None:
    bob = _token_client(bob_user)
    assert bob.post("/api/v1/models/", {"name": "bobs"}, format="json").status_code == 201
    body = {"checkpoint_uuid": str(checkpoint.uuid)}
    refused = bob.post("/api/v1/models/bobs/versions/", body, format="json")
    assert refused.status_code == 403, refused.content
    detail = refused.json()["detail"]
    experiment_id = checkpoint.trial.experiment_id
    assert f"owner of experiment {experiment_id} (alice)" in detail
    assert "keeps the checkpoint from being deleted" in detail
    assert not ModelVersion.objects.exists()
    # So nothing stands in the owner's way.
    assert api.delete(f"/api/v1/checkpoints/{checkpoint.uuid}/").status_code == 204
    assert reload(checkpoint).state == CheckpointState.DELETED
    assert not build_storage_manager(checkpoint.storage).exists(str(checkpoint.uuid))


def test_the_owner_and_an_admin_may_register_it(api, django_user_model, checkpoint) -> None:
    body = {"checkpoint_uuid": str(checkpoint.uuid)}
    assert api.post("/api/v1/models/", {"name": "alices"}, format="json").status_code == 201
    assert api.post("/api/v1/models/alices/versions/", body, format="json").status_code == 201
    admin = _token_client(django_user_model.objects.create_user("root", is_staff=True))
    assert admin.post("/api/v1/models/", {"name": "roots"}, format="json").status_code == 201
    assert admin.post("/api/v1/models/roots/versions/", body, format="json").status_code == 201
    holders = ModelVersion.objects.filter(checkpoint=checkpoint)
    assert sorted(holders.values_list("model__name", flat=True)) == ["alices", "roots"]
    # Held now: the owner's delete is refused until the versions go (as documented).
    assert api.delete(f"/api/v1/checkpoints/{checkpoint.uuid}/").status_code == 409


def test_the_dashboard_form_refuses_and_hides_it_for_another_user(
    alice_session, bob_user, checkpoint
) -> None:
    bob = Client()
    bob.force_login(bob_user)
    trial_page = reverse("dashboard:trial", args=[checkpoint.trial_id])
    assert 'class="register-model"' not in bob.get(trial_page).content.decode()
    assert 'class="register-model"' in alice_session.get(trial_page).content.decode()
    data = {"checkpoint": str(checkpoint.uuid), "model": "bobs-dash", "next": trial_page}
    response = bob.post(reverse("dashboard:model-register"), data)
    assert response.status_code == 302
    notes = [str(m) for m in get_messages(response.wsgi_request)]
    assert any("Checkpoint not registered: Only the owner of experiment" in n for n in notes)
    # The model the form would have created went with the refusal.
    assert not RegisteredModel.objects.filter(name="bobs-dash").exists()
    assert not ModelVersion.objects.exists()


@pytest.fixture
def alice_session(user) -> Client:
    """The dashboard as alice (``user``: the owner of ``api``'s experiments)."""
    client = Client()
    client.force_login(user)
    return client
