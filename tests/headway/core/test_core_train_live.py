"""Core API 0.38 calls of a trial's own run against a live registry:
``train.report_progress`` becomes the trial's (and experiment's) progress, and
``checkpoint.set_metadata`` / ``get_metadata`` go through ``POST checkpoints/{uuid}/metadata/``."""

from __future__ import annotations

import pathlib

import pytest

from headway import core
from registry.models import Checkpoint, Experiment, Trial
from tests.helpers import start_run
from tests.helpers_checkpoints import trial_on_storage
from tests.helpers_trial_process import write_cluster_info

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run_info(api, live_server, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Trial:
    """A started run of a trial on shared_fs storage; this process is its trial process."""
    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path / "storage")})
    run = start_run(trial)
    path = write_cluster_info(
        live_server.url, trial, run, tmp_path / "run" / "cluster-info.json", latest_checkpoint=None
    )
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    return trial


def test_progress_and_checkpoint_metadata_reach_the_registry(run_info: Trial) -> None:
    trial = run_info
    with core.init() as ctx:
        ctx.train.report_progress(0.4)
        assert Trial.objects.get(id=trial.id).progress == pytest.approx(0.4)
        assert Experiment.objects.get(id=trial.experiment_id).progress > 0
        with ctx.checkpoint.store_path({"steps_completed": 3}) as (path, storage_id):
            (path / "w.bin").write_bytes(b"w")
        merged = ctx.checkpoint.set_metadata(storage_id, {"dataset": "digits"})
        assert merged == {"steps_completed": 3, "dataset": "digits"}
        assert ctx.checkpoint.get_metadata(storage_id) == merged
    assert Checkpoint.objects.get(uuid=storage_id).metadata == merged
