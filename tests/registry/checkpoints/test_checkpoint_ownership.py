"""Checkpoints belong to the trial that wrote them, and load with ``weights_only=True``.

The attack (High finding "One user can run code in another user's trial"): user B's trial writes
a pickled ``state-dict.pth`` into the shared checkpoint folder and registers it on user A's trial
with a huge ``steps_completed``; A's next run restores it with ``torch.load(weights_only=False)``
and runs B's payload with A's token. Now registration takes the trial's own live run token or its
owner (``registry.authz``), the run is the token's, the storage is the trial's experiment's, and
the SDK loads checkpoints with ``weights_only=True`` unless told to trust them.
"""

from __future__ import annotations

import pathlib
import pickle
import random
import uuid

import numpy as np
import pytest
import torch
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from headway.pytorch import _checkpointing as ckpt
from registry import lifecycle
from tests.helpers import TINY_CONFIG, TINY_MODEL, start_run


class _Payload:
    """Unpickling it creates the file ``marker``: what an attacker's code would do instead."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _write_checkpoint(storage: pathlib.Path, state: dict) -> str:
    storage_id = str(uuid.uuid4())
    folder = storage / storage_id
    folder.mkdir(parents=True)
    torch.save(state, folder / ckpt.STATE_FILE)
    return storage_id


def _register(client: APIClient, trial_id: int, storage_id: str, steps: int, **extra):
    body = {
        "uuid": storage_id,
        "steps_completed": steps,
        "resources": {ckpt.STATE_FILE: 1},
        **extra,
    }
    return client.post(f"/api/v1/trials/{trial_id}/checkpoints/", body, format="json")


@pytest.fixture
def shared_storage(tmp_path) -> pathlib.Path:
    return tmp_path / "shared-checkpoints"


@pytest.fixture
def two_trials(db, django_user_model, shared_storage):
    """Alice's and Bob's running trials, both checkpointing into one shared folder."""
    config = TINY_CONFIG + f"checkpoint_storage: {{type: shared_fs, host_path: {shared_storage}}}\n"
    out = {}
    for name in ("alice", "bob"):
        user = django_user_model.objects.create_user(name)
        experiment = lifecycle.experiment_create(
            owner=user, config_source=config, model_definition=TINY_MODEL
        )
        trial = experiment.trials.get()
        run = start_run(trial)
        out[name] = (trial, run, Token.objects.create(user=user).key)
    return out


def test_finding_one_user_can_run_code_in_another_users_trial(
    two_trials, shared_storage, tmp_path
) -> None:
    alice_trial, alice_run, _ = two_trials["alice"]
    _, bob_run, bob_token = two_trials["bob"]
    model = torch.nn.Linear(2, 1)
    mine = _write_checkpoint(shared_storage, {"models_state_dict": [model.state_dict()]})
    alice_sdk = _client(alice_run.token)
    assert _register(alice_sdk, alice_trial.id, mine, 10).status_code == 201

    marker = tmp_path / "payload-ran"
    planted = _write_checkpoint(shared_storage, {"models_state_dict": [_Payload(marker)]})
    # Bob's user token, then Bob's trial's run token, on Alice's trial: both refused.
    as_bob = _register(_client(bob_token), alice_trial.id, planted, 10**9)
    assert as_bob.status_code == 403 and "owner" in as_bob.json()["detail"]
    as_bobs_run = _register(_client(bob_run.token), alice_trial.id, planted, 10**9)
    assert as_bobs_run.status_code == 403
    assert f"trial {bob_run.trial_id}" in as_bobs_run.json()["detail"]

    # Alice's next run resumes from what the registry says: her own checkpoint.
    latest = alice_sdk.get(f"/api/v1/trials/{alice_trial.id}/").json()["latest_checkpoint"]
    assert latest == mine
    state = ckpt.load_state(shared_storage / latest, torch.device("cpu"))
    assert state["models_state_dict"][0].keys() == model.state_dict().keys()
    # Even handed Bob's file directly, the SDK refuses to unpickle it.
    with pytest.raises(pickle.UnpicklingError, match="weights_only"):
        ckpt.load_state(shared_storage / planted, torch.device("cpu"))
    assert not marker.exists()


def test_a_run_token_registers_only_as_its_own_run(two_trials, shared_storage) -> None:
    trial, run, _ = two_trials["alice"]
    storage_id = _write_checkpoint(shared_storage, {})
    response = _register(_client(run.token), trial.id, storage_id, 5, run_id=run.run_id + 7)
    assert response.status_code == 400 and "run_id" in response.json()["errors"]
    ok = _register(_client(run.token), trial.id, storage_id, 5, run_id=run.run_id)
    assert ok.status_code == 201 and ok.json()["run_id"] == run.run_id


def test_finding_checkpoints_load_with_weights_only_by_default(tmp_path, monkeypatch) -> None:
    """A malicious ``state-dict.pth`` (its unpickling creates a file) is refused with an error
    naming the file and the opt-in; the opt-ins (argument, PyTorch's env var) do unpickle it."""
    monkeypatch.delenv(ckpt.TRUST_PICKLES_ENV, raising=False)
    marker = tmp_path / "payload-ran"
    folder = tmp_path / "ckpt"
    folder.mkdir()
    torch.save({"callbacks": {"evil": _Payload(marker)}}, folder / ckpt.STATE_FILE)
    with pytest.raises(pickle.UnpicklingError) as refused:
        ckpt.load_state(folder, torch.device("cpu"))
    message = str(refused.value)
    assert str(folder / ckpt.STATE_FILE) in message
    assert "weights_only" in message and ckpt.TRUST_PICKLES_ENV in message
    assert not marker.exists()

    ckpt.load_state(folder, torch.device("cpu"), weights_only=False)
    assert marker.exists()
    marker.unlink()
    monkeypatch.setenv(ckpt.TRUST_PICKLES_ENV, "1")
    ckpt.load_state(folder, torch.device("cpu"))
    assert marker.exists()


def test_rng_state_round_trips_under_weights_only(tmp_path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    ckpt.save_state(tmp_path, {"rng_state": ckpt.capture_rng_state()})
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    ckpt.restore_rng_state(ckpt.load_state(tmp_path, torch.device("cpu"))["rng_state"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_checkpoints_with_a_numpy_array_rng_state_still_load(tmp_path) -> None:
    """Checkpoints written before this change hold NumPy's state as an ``ndarray``."""
    np.random.seed(5)
    old = {"python": random.getstate(), "numpy": np.random.get_state()}
    old["torch"] = torch.random.get_rng_state()
    ckpt.save_state(tmp_path, {"rng_state": old})
    expected = float(np.random.rand())
    np.random.seed(0)
    ckpt.restore_rng_state(ckpt.load_state(tmp_path, torch.device("cpu"))["rng_state"])
    assert float(np.random.rand()) == expected
