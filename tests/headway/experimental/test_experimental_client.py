"""``headway.experimental.client`` against a live registry: login, experiments, trials,
checkpoints and downloads (Determined's ``determined.experimental.client`` names)."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from headway.client import NotFoundError
from headway.experimental import client
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

FILES = {"state-dict.pth": b"\x00w" * 100, "tensorboard/events.out.tfevents.1": b"ev"}


@pytest.fixture
def stored(api, live_server, tmp_path, monkeypatch):
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_TOKEN", raising=False)
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    uuids = [
        store_over_rest(api, trial, FILES, s, {"steps_completed": s, "val": 1.0 / s})
        for s in (10, 20)
    ]
    client.login(master=live_server.url, user="alice", password="alice-password")
    return trial, uuids


@pytest.mark.django_db(transaction=True)
def test_client_walks_experiment_trials_and_checkpoints(stored, tmp_path: pathlib.Path) -> None:
    trial, (first, second) = stored
    experiment = client.get_experiment(trial.experiment_id)
    assert experiment.id == trial.experiment_id
    trials = experiment.get_trials()
    assert [t.id for t in trials] == [trial.id]
    same = client.get_trial(trial.id)
    assert [c.uuid for c in same.list_checkpoints()] == [second, first]
    assert same.top_checkpoint().uuid == second
    assert same.top_checkpoint(sort_by="val", smaller_is_better=False).uuid == first
    ckpt = client.get_checkpoint(first)
    assert ckpt.metadata["steps_completed"] == 10 and ckpt.uuid == first
    path = ckpt.download(tmp_path / "dl")
    assert pathlib.Path(path, "state-dict.pth").read_bytes() == FILES["state-dict.pth"]
    assert pathlib.Path(path, "tensorboard/events.out.tfevents.1").read_bytes() == b"ev"
    with pytest.raises(NotFoundError):
        client.get_checkpoint(str(uuid.uuid4()))


@pytest.mark.django_db(transaction=True)
def test_login_saves_a_token_reused_without_credentials(stored, live_server) -> None:
    trial, _ = stored
    client.login(master=live_server.url)  # the token saved by the fixture's login
    assert client.get_trial(trial.id).id == trial.id


@pytest.fixture
def served(monkeypatch) -> list[dict]:
    """The registry's downloads asked for (``RegistryAPI.checkpoint_download``, still made)."""
    from headway.client import RegistryAPI

    calls: list[dict] = []
    real = RegistryAPI.checkpoint_download

    def counted(self, uuid, **params):
        calls.append(params)
        return real(self, uuid, **params)

    monkeypatch.setattr(RegistryAPI, "checkpoint_download", counted)
    return calls


def _tree(root: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("mode", "through_registry"),
    [
        (client.DownloadMode.DIRECT, False),
        (client.DownloadMode.AUTO, False),  # the storage is mounted here
        (client.DownloadMode.MASTER, True),
    ],
)
def test_download_modes_on_shared_fs(stored, tmp_path, served, mode, through_registry) -> None:
    _, (first, _) = stored
    path = client.get_checkpoint(first).download(tmp_path / "dl", mode=mode)
    assert _tree(pathlib.Path(path)) == FILES
    assert bool(served) is through_registry


@pytest.mark.django_db(transaction=True)
def test_download_mode_must_be_a_download_mode(stored, tmp_path) -> None:
    _, (first, _) = stored
    with pytest.raises(ValueError, match="mode must be a DownloadMode"):
        client.get_checkpoint(first).download(tmp_path / "dl", mode="direct")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("checkpoint_storage", ["s3"], indirect=True)
def test_s3_checkpoints_come_through_the_registry(
    api, live_server, checkpoint_storage, tmp_path, monkeypatch, served
) -> None:
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_TOKEN", raising=False)
    trial = trial_on_storage(api, checkpoint_storage)
    storage_id = store_over_rest(api, trial, FILES, 5)
    client.login(master=live_server.url, user="alice", password="alice-password")
    ckpt = client.get_checkpoint(storage_id)
    with pytest.raises(ValueError, match=r"DIRECT: .*s3 storage"):
        ckpt.download(tmp_path / "direct", mode=client.DownloadMode.DIRECT)
    assert served == []
    path = ckpt.download(tmp_path / "auto")  # AUTO falls back to the registry
    assert _tree(pathlib.Path(path)) == FILES
    assert len(served) == 1
