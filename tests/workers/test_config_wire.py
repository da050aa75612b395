"""The experiment config crosses from the master to a host and on to the trial process typed:
the master builds the launch spec, the host agent's client parses it from the route's JSON,
the host writes the trial's cluster info, and the trial reads ``ClusterInfo.trial.config`` by
attribute. The JSON on the wire is the stored config as stored, so an older host and a newer
master keep reading each other; a field the receiving side cannot validate is refused, naming it.

Real PostgreSQL (``DATABASE_URL``), a real server thread (pytest-django's ``live_server``), the
host agent's real client and cluster-info writer, the SDK's real reader.
"""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from headway import get_cluster_info
from headway.client import wire
from headway.expconf import ExperimentConfig, Length, Unit, config_json
from registry import lifecycle
from registry.models import TrialRun
from tests.helpers import TINY_MODEL, reload
from tests.host_api_helpers import host_api
from workers import trial_start

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = """
name: typed-wire
entrypoint: model_def:TinyTrial
hyperparameters:
  global_batch_size: 8
  lr: {type: log, minval: -3, maxval: -1}
searcher: {name: single, metric: validation_loss, smaller_is_better: false, max_length: {epochs: 2}}
resources: {slots_per_trial: 1, priority: 7}
environment:
  environment_variables: {cpu: ["DATA_DIR=/data/cpu"], cuda: ["DATA_DIR=/data/gpu"]}
min_validation_period: {batches: 5}
perform_initial_validation: true
data: {url: "s3://bucket/digits"}
"""


@pytest.fixture
def placed(live_server, django_user_model):
    """A single-trial experiment placed by the real scheduler on host ``wire-a``; its run
    claimed by that host's agent client. Returns (client, experiment, trial, run ids)."""
    owner = django_user_model.objects.create_user("config-wire-owner")
    api = host_api(live_server, "wire-a")
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=CONFIG, model_definition=TINY_MODEL
    )
    trial = experiment.trials.get()
    run = TrialRun.objects.get(trial=trial, run_id=reload(trial).run_id)
    ids = (trial.id, run.run_id)
    assert api.run_claim(*ids, worker="wire-a:1").claimed
    return api, experiment, trial, ids


def test_the_config_arrives_typed_on_the_host_and_in_the_trial(
    placed, tmp_path, monkeypatch
) -> None:
    api, experiment, trial, ids = placed
    # The wire: the route's JSON holds the config exactly as the master stored it.
    body = api._request("run_spec", trial_id=ids[0], run_id=ids[1]).json()
    assert body["experiment_config"] == experiment.config
    # The host agent: parsed once by the client, read by attribute.
    spec = api.run_spec(*ids)
    config = spec.experiment_config
    assert isinstance(config, ExperimentConfig)
    assert config.resources.slots_per_trial == 1 and config.resources.priority == 7
    assert config.searcher.metric == "validation_loss"
    assert config.environment.variables("cpu") == {"DATA_DIR": "/data/cpu"}
    assert config.entrypoint_trial_class == ("model_def", "TinyTrial")
    assert config_json(config) == experiment.config  # passed on as received
    # The trial process: the cluster info the host writes, read by the SDK.
    info_path = tmp_path / "cluster_info.json"
    info_path.write_text(json.dumps(trial_start._cluster_info(spec, "run-token")))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(info_path))
    info = get_cluster_info()
    assert info is not None and info.trial.trial_id == trial.id
    typed = info.trial.config
    assert isinstance(typed, ExperimentConfig)
    assert typed.searcher.max_length == Length(unit=Unit.EPOCHS, value=2)
    assert typed.searcher.smaller_is_better is False
    assert typed.min_validation_period == Length(unit=Unit.BATCHES, value=5)
    assert typed.perform_initial_validation is True
    assert typed.reproducibility.experiment_seed == experiment.conf.reproducibility.experiment_seed
    assert typed.checkpoint_storage == experiment.conf.checkpoint_storage
    # Determined's dict spellings stay: the stored config, and its data section.
    assert info.trial._config == experiment.config
    assert info.trial.user_data == {"url": "s3://bucket/digits"}


def test_a_config_this_host_does_not_know_is_refused_naming_the_field(placed) -> None:
    api, _, _, ids = placed
    body = api._request("run_spec", trial_id=ids[0], run_id=ids[1]).json()
    # As a newer master would send it: a field this host's schema lacks, a value it refuses.
    newer = json.loads(json.dumps(body))
    newer["experiment_config"]["gradient_checkpointing"] = True
    with pytest.raises(ValidationError, match=r"experiment_config\.gradient_checkpointing"):
        wire.LaunchSpec.model_validate(newer)
    bad = json.loads(json.dumps(body))
    bad["experiment_config"]["resources"]["slots_per_trial"] = 0
    with pytest.raises(ValidationError, match=r"experiment_config\.resources\.slots_per_trial"):
        wire.LaunchSpec.model_validate(bad)


def test_a_cluster_info_with_a_bad_field_names_it(placed, tmp_path, monkeypatch) -> None:
    api, _, _, ids = placed
    info = trial_start._cluster_info(api.run_spec(*ids), "run-token")
    info["experiment_config"]["searcher"]["metric"] = ""
    path = tmp_path / "cluster_info.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    with pytest.raises(RuntimeError, match=r"experiment_config\.searcher\.metric"):
        get_cluster_info()


@pytest.mark.parametrize("seed", range(3))
def test_a_stored_config_round_trips_unchanged(seed: int) -> None:
    """What the master stores (``to_dict()``) is what ``config_json`` sends after parsing,
    searcher and storage forms included."""
    from headway.expconf import parse_experiment_config

    searchers = [
        {"name": "random", "metric": "m", "max_trials": 3, "max_length": {"records": 64}},
        {
            "name": "adaptive_asha",
            "metric": "m",
            "max_trials": 4,
            "time_metric": "t",
            "max_time": 9,
        },
        {"name": "grid", "metric": "m", "max_length": 5},
    ]
    stored = parse_experiment_config(
        {
            "entrypoint": ["python", "train.py"],
            "searcher": searchers[seed],
            "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1, "count": 2}},
            "checkpoint_storage": {"type": "shared_fs", "host_path": "/ckpt", "save_trial_best": 2},
            "reproducibility": {"experiment_seed": random.Random(seed).randrange(2**31)},
        }
    ).to_dict()
    assert config_json(wire.LaunchSpec.model_validate(_spec(stored)).experiment_config) == stored


def _spec(config: dict) -> dict:
    return {
        "experiment_id": 1, "trial_id": 2, "run_id": 1, "hparams": {}, "trial_seed": 0,
        "experiment_config": config, "latest_checkpoint": None, "latest_checkpoint_steps": None,
        "searcher_length": None, "slots": 1, "devices": ["cpu0"], "gpu": False, "run_slots": 1,
        "model_definition_bytes": 0,
    }  # fmt: skip
