"""A managed run of a trial against the live registry, this process being its trial process."""

from __future__ import annotations

import pathlib

import pytest

from registry import lifecycle
from registry.models import RunState
from tests.helpers import start_run
from tests.helpers_checkpoints import trial_on_storage
from tests.helpers_trial_process import write_cluster_info as write_info


def write_cluster_info(live_server, trial, run, path: pathlib.Path) -> pathlib.Path:
    """The cluster info a worker gives run ``run`` of ``trial`` (its latest checkpoint to
    resume from), written to ``path``."""
    return write_info(live_server.url, trial, run, path)


@pytest.fixture
def managed_trial(api, live_server, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch):
    """``start(trial=None)``: start a run of a new (or the given) trial on shared_fs storage and
    point ``$HEADWAY_CLUSTER_INFO`` at it; returns ``(trial, info_path)``. Runs still live at
    the end exit, as their process would."""
    started = []

    def start(trial=None):
        if trial is None:
            storage = {"type": "shared_fs", "host_path": str(tmp_path / "storage")}
            trial = trial_on_storage(api, storage)
        run = start_run(trial)
        started.append(run)
        path = write_cluster_info(
            live_server, trial, run, tmp_path / f"run-{run.run_id}" / "cluster-info.json"
        )
        monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
        return trial, path

    yield start
    for run in started:
        run.refresh_from_db()
        if run.state == RunState.RUNNING:
            lifecycle.trial_run_exited(trial_id=run.trial_id, run_id=run.run_id, exit_code=0)
