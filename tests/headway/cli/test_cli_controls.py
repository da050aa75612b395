"""``headway experiment|trial pause/activate/cancel/kill/archive`` and ``trial continue`` against
a real registry (pytest-django's live server); the trial's first run stays QUEUED (no worker)."""

from __future__ import annotations

import os
import uuid

import pytest
import requests

from headway.cli.main import main
from registry.lifecycle import checkpoint_register
from registry.models import Experiment, State, Trial
from tests.helpers import b64, make_tar_gz

CONFIG = (
    "name: t\nentrypoint: python train.py\n"
    "hyperparameters: {lr: 0.1, optimizer: {name: sgd, momentum: 0.9}}\n"
    "searcher: {name: single, metric: loss, max_length: 10}\n"
)


@pytest.fixture
def server(live_server, transactional_db, django_user_model, monkeypatch, tmp_path):
    """The live server's URL, with $HEADWAY_TOKEN set to a fresh user's token."""
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("carol", password="pw-carol")
    token = Token.objects.create(user=user).key
    monkeypatch.setenv("HEADWAY_TOKEN", token)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url


@pytest.fixture
def experiment_id(server: str) -> int:
    answer = requests.post(
        f"{server}/api/v1/experiments/",
        json={"config": CONFIG, "model_definition": b64(make_tar_gz({"train.py": "print(1)\n"}))},
        headers={"Authorization": f"Token {os.environ['HEADWAY_TOKEN']}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def _cli(server: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--master", server, *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_experiment_controls_round_trip(
    server: str, experiment_id: int, capsys: pytest.CaptureFixture[str]
) -> None:
    eid = str(experiment_id)
    assert _cli(server, capsys, "experiment", "pause", eid) == (0, f"Experiment {eid}: PAUSED", "")
    # Pausing again is a no-op, not an error.
    assert _cli(server, capsys, "e", "pause", eid) == (0, f"Experiment {eid}: PAUSED", "")
    assert _cli(server, capsys, "e", "activate", eid) == (0, f"Experiment {eid}: ACTIVE", "")
    # The re-queued run is still QUEUED, so kill drops it at once.
    assert _cli(server, capsys, "e", "kill", eid) == (0, f"Experiment {eid}: CANCELED", "")

    code, out, err = _cli(server, capsys, "e", "activate", eid)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and "CANCELED" in err
    assert "HTTP" not in err  # the master's reason, not the request line

    assert _cli(server, capsys, "e", "archive", eid) == (
        0,
        f"Experiment {eid}: CANCELED (archived)",
        "",
    )
    assert Experiment.objects.get(id=experiment_id).archived is True
    assert _cli(server, capsys, "e", "unarchive", eid) == (0, f"Experiment {eid}: CANCELED", "")
    assert Experiment.objects.get(id=experiment_id).archived is False


def test_trial_controls_and_continue(
    server: str, experiment_id: int, capsys: pytest.CaptureFixture[str]
) -> None:
    trial = Trial.objects.get(experiment_id=experiment_id)
    tid = str(trial.id)
    assert _cli(server, capsys, "trial", "pause", tid) == (0, f"Trial {tid}: PAUSED", "")
    assert _cli(server, capsys, "t", "pause", tid) == (0, f"Trial {tid}: PAUSED", "")
    assert Experiment.objects.get(id=experiment_id).state == State.PAUSED
    assert _cli(server, capsys, "t", "activate", tid) == (0, f"Trial {tid}: ACTIVE", "")
    assert _cli(server, capsys, "t", "kill", tid) == (0, f"Trial {tid}: CANCELED", "")
    code, _, err = _cli(server, capsys, "t", "pause", tid)
    assert code == 1 and "CANCELED" in err

    # No checkpoint yet: the master refuses, naming the field.
    code, _, err = _cli(server, capsys, "t", "continue", tid)
    assert code == 1 and "checkpoint" in err

    checkpoint = uuid.uuid4()
    checkpoint_register(
        trial_id=trial.id,
        uuid=checkpoint,
        steps_completed=10,
        run_id=None,
        resources={"state.pt": 100},
        metadata={},
    )
    code, out, err = _cli(
        server,
        capsys,
        "t",
        "continue",
        tid,
        "--max-length",
        "20",
        "--hparam",
        "lr=0.5",
        "--hparam",
        "optimizer.momentum=0.5",
    )
    assert (code, err) == (0, "")
    new = Experiment.objects.exclude(id=experiment_id).get()
    assert out == f"Created experiment {new.id} (continues trial {tid})"
    assert new.config["searcher"]["max_length"] == {"batches": 20}
    new_trial = new.trials.get()
    # Dotted overrides keep the rest of their group.
    assert new_trial.hparams == {"lr": 0.5, "optimizer": {"name": "sgd", "momentum": 0.5}}
    assert new_trial.warm_start_checkpoint == checkpoint


def test_continue_rejects_bad_overrides_before_sending(
    server: str, experiment_id: int, capsys: pytest.CaptureFixture[str]
) -> None:
    tid = str(Trial.objects.get(experiment_id=experiment_id).id)
    code, _, err = _cli(server, capsys, "t", "continue", tid, "--max-length", "weeks=3")
    assert code == 2 and "weeks=3" in err
    code, _, err = _cli(server, capsys, "t", "continue", tid, "--hparam", "lr")
    assert code == 2 and "NAME=VALUE" in err
    assert Experiment.objects.count() == 1
