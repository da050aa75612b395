"""``headway.experimental.core_v2`` against a live registry: unmanaged runs made by the script
itself report metrics and checkpoints, end COMPLETED or ERROR, resume on their external ids, are
lost when their heartbeats stop, and stay their owner's."""

from __future__ import annotations

import json
import pathlib
from datetime import timedelta

import pytest

from headway.client import RegistryAPI
from headway.experimental import core_v2
from registry import lifecycle
from registry.models import (
    Checkpoint,
    Experiment,
    MetricReport,
    RunState,
    State,
    Trial,
    TrialLog,
    TrialRun,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(unmanaged_client: RegistryAPI) -> RegistryAPI:
    """A user's client of the live registry (``unmanaged_client``)."""
    return unmanaged_client


@pytest.fixture(autouse=True)
def _closed(transactional_db, live_server):
    """Close the run a test left open while the database is there, then let the live server's
    request threads finish (a preemption poll answers once its run has ended) before the
    database is flushed under them."""
    yield
    core_v2.close()


def _points(trial_id: int, group: str) -> list[int]:
    rows = MetricReport.objects.filter(trial_id=trial_id, group=group).order_by("steps_completed")
    return list(rows.values_list("steps_completed", flat=True))


def test_singleton_run_reports_metrics_and_a_checkpoint_then_completes(client) -> None:
    core_v2.init(config=core_v2.Config(name="unmanaged-1", hparams={"lr": 0.1}), client=client)
    assert core_v2.info is not None and core_v2.train is not None
    trial_id = core_v2.info.trial.trial_id
    trial = Trial.objects.select_related("experiment").get(id=trial_id)
    assert trial.experiment.unmanaged and trial.experiment.name == "unmanaged-1"
    assert trial.state == State.ACTIVE and trial.hparams == {"lr": 0.1}
    assert TrialRun.objects.get(trial=trial, run_id=1).state == RunState.RUNNING
    for step in range(1, 4):
        core_v2.train.report_training_metrics(steps_completed=step, metrics={"loss": 1 / step})
    core_v2.train.report_validation_metrics(steps_completed=3, metrics={"loss": 0.2})
    assert core_v2.checkpoint is not None
    with core_v2.checkpoint.store_path({"steps_completed": 3}) as (path, storage_id):
        (path / "state").write_text("3")
    url = core_v2.url_reverse_webui_exp_view()
    assert url.endswith(f"/experiments/{trial.experiment_id}/")
    core_v2.close()
    assert core_v2.train is None
    trial.refresh_from_db()
    assert trial.state == State.COMPLETED
    assert Experiment.objects.get(id=trial.experiment_id).state == State.COMPLETED
    assert _points(trial_id, "training") == [1, 2, 3]
    assert _points(trial_id, "validation") == [3]
    assert str(trial.latest_checkpoint) == storage_id
    assert Checkpoint.objects.get(uuid=storage_id).steps_completed == 3
    # The stored config names the admin's default location, as a managed experiment's does.
    assert trial.experiment.config["checkpoint_storage"]["location"] == "default"


def test_an_exception_in_the_block_ends_the_trial_error(client) -> None:
    context = core_v2.init_context(config=core_v2.Config(name="fails"), client=client)
    assert context.info is not None
    trial_id = context.info.trial.trial_id
    with pytest.raises(RuntimeError, match="boom"), context as ctx:
        ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
        raise RuntimeError("boom")
    trial = Trial.objects.get(id=trial_id)
    assert trial.state == State.ERROR
    assert _points(trial_id, "training") == [1]


def test_an_uncaught_exception_ends_the_singleton_run_error(client) -> None:
    import sys

    core_v2.init(config=core_v2.Config(name="uncaught"), client=client)
    assert core_v2.info is not None
    trial_id = core_v2.info.trial.trial_id
    try:
        raise ValueError("escaped the script")
    except ValueError:
        sys.excepthook(*sys.exc_info())  # what the interpreter calls before exiting
    core_v2.close()  # what atexit calls
    assert Trial.objects.get(id=trial_id).state == State.ERROR


def test_a_rerun_with_the_same_external_ids_continues_the_trial(client) -> None:
    config = core_v2.Config(
        name="resumable", external_experiment_id="exp-a", external_trial_id="trial-a"
    )
    core_v2.init(config=config, client=client)
    assert core_v2.info is not None and core_v2.train and core_v2.checkpoint
    first = core_v2.info
    assert first.latest_checkpoint is None
    core_v2.train.report_training_metrics(steps_completed=10, metrics={"loss": 1.0})
    with core_v2.checkpoint.store_path({"steps_completed": 10}) as (path, storage_id):
        (path / "state").write_text("10")
    core_v2.close()
    assert Trial.objects.get(id=first.trial.trial_id).state == State.COMPLETED

    core_v2.init(config=config, client=client)
    assert core_v2.info is not None and core_v2.train and core_v2.checkpoint
    second = core_v2.info
    assert second.trial.trial_id == first.trial.trial_id
    assert second.trial.experiment_id == first.trial.experiment_id
    assert second.trial.run_id == first.trial.run_id + 1
    assert second.latest_checkpoint == storage_id
    assert second.latest_checkpoint_steps == 10
    with core_v2.checkpoint.restore_path(storage_id) as path:
        assert (pathlib.Path(path) / "state").read_text() == "10"
    trial = Trial.objects.get(id=second.trial.trial_id)
    assert trial.state == State.ACTIVE
    assert Experiment.objects.get(id=trial.experiment_id).state == State.ACTIVE
    core_v2.train.report_training_metrics(steps_completed=20, metrics={"loss": 0.5})
    core_v2.close()
    assert _points(trial.id, "training") == [10, 20]
    assert Trial.objects.get(id=trial.id).state == State.COMPLETED
    # Another external trial id joins the same experiment as a second trial.
    other = core_v2.Config(name="resumable", external_experiment_id="exp-a", external_trial_id="b")
    core_v2.init(config=other, client=client)
    assert core_v2.info is not None
    assert core_v2.info.trial.experiment_id == first.trial.experiment_id
    assert core_v2.info.trial.trial_id != first.trial.trial_id


def test_a_run_whose_heartbeats_stop_is_lost(client) -> None:
    context = core_v2.init_context(config=core_v2.Config(name="silent"), client=client)
    assert context.info is not None
    trial_id, run_id = context.info.trial.trial_id, context.info.trial.run_id
    # A fresh heartbeat is inside any positive timeout; a zero timeout makes it stale at once.
    assert lifecycle.reap_lost_unmanaged_runs(timeout=timedelta(hours=1)) == []
    # The managed reaper leaves unmanaged runs alone (no host, nothing to re-queue).
    lifecycle.reap_lost_runs(timeout=timedelta(0))
    assert TrialRun.objects.get(trial_id=trial_id, run_id=run_id).state == RunState.RUNNING
    assert lifecycle.reap_lost_unmanaged_runs(timeout=timedelta(0)) == [(trial_id, run_id)]
    trial = Trial.objects.get(id=trial_id)
    assert trial.state == State.ERROR
    assert TrialRun.objects.get(trial_id=trial_id, run_id=run_id).exit_code is None
    assert TrialLog.objects.filter(trial_id=trial_id, message__contains="lost").exists()
    # The script's later close() changes nothing: the run had ended.
    context.close(timeout=5)
    assert Trial.objects.get(id=trial_id).state == State.ERROR


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (core_v2.Config(checkpoint_storage="no-such-location"), "config.checkpoint_storage"),
        (core_v2.Config(workspace="team"), "config.workspace"),
        (core_v2.Config(searcher={"name": "random"}), "config.searcher.name"),
        (core_v2.Config(external_trial_id="t"), "external_trial_id"),
    ],
)
def test_a_bad_config_is_refused_naming_the_field(client, config, field) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        core_v2.init(config=config, client=client)
    assert not Experiment.objects.exists()


def test_an_unmanaged_start_without_a_token_says_how_to_log_in(live_server) -> None:
    with pytest.raises(ValueError, match="headway login"):
        core_v2.init(config=core_v2.Config(), client=RegistryAPI(live_server.url, "nope"))


def test_the_master_and_token_come_from_the_environment(
    api, live_server, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from headway.experimental import client as experimental_client

    monkeypatch.setenv("HEADWAY_MASTER", live_server.url)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path))
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    monkeypatch.setattr(experimental_client, "_api", None)
    core_v2.init(config=core_v2.Config(name="from-env"))
    assert core_v2.info is not None
    assert Experiment.objects.get(id=core_v2.info.trial.experiment_id).owner.username == "alice"


def test_another_users_token_cannot_touch_the_trial(client, live_server, django_user_model):
    from rest_framework.authtoken.models import Token

    config = core_v2.Config(external_experiment_id="shared-name", external_trial_id="t")
    core_v2.init(config=config, client=client)
    assert core_v2.info is not None
    trial_id, run_id = core_v2.info.trial.trial_id, core_v2.info.trial.run_id
    bob = django_user_model.objects.create_user("bob", password="bob-password")
    bob_api = RegistryAPI(live_server.url, Token.objects.create(user=bob).key)
    from headway.client import APIError

    body = json.dumps({"reports": [{"group": "training", "steps_completed": 5, "metrics": {}}]})
    for call in (
        lambda: bob_api.unmanaged_heartbeat(trial_id, run_id),
        lambda: bob_api.unmanaged_exit(trial_id, run_id, exit_code=1),
        lambda: bob_api.trial_metrics_report(trial_id, body.encode()),
    ):
        with pytest.raises(APIError) as refused:
            call()
        assert refused.value.status in (403, 404)
    # The same external ids under bob's token make bob's own experiment, not alice's.
    bobs = bob_api.unmanaged_start(
        config={}, external_experiment_id="shared-name", external_trial_id="t"
    )
    assert bobs.trial_id != trial_id and not bobs.resumed
    assert Trial.objects.get(id=trial_id).state == State.ACTIVE
    assert TrialRun.objects.get(trial_id=trial_id, run_id=run_id).state == RunState.RUNNING
    bob_api.session._http.close()


def test_inside_a_managed_trial_init_uses_that_trial(api, client, monkeypatch, tmp_path) -> None:
    from tests.helpers import start_run
    from tests.helpers_checkpoints import trial_on_storage

    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path)})
    run = start_run(trial)
    trial.refresh_from_db()
    info = {
        "master_url": client.session.master_url,
        "token": run.token,
        "experiment_id": trial.experiment_id,
        "trial_id": trial.id,
        "run_id": run.run_id,
        "experiment_config": trial.experiment.config,
    }
    path = tmp_path / "cluster-info.json"
    path.write_text(json.dumps(info))
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    experiments = Experiment.objects.count()
    # The config is ignored (as in Determined): no unmanaged experiment is made.
    core_v2.init(config=core_v2.Config(name="ignored", external_experiment_id="x"))
    assert core_v2.info is not None and core_v2.train is not None
    assert core_v2.info.trial.trial_id == trial.id
    core_v2.train.report_training_metrics(steps_completed=4, metrics={"loss": 0.1})
    core_v2.close()
    assert Experiment.objects.count() == experiments
    assert _points(trial.id, "training") == [4]
    # The worker, not the script, ends a managed run.
    assert TrialRun.objects.get(trial=trial, run_id=run.run_id).state == RunState.RUNNING


def test_the_chief_heartbeats_while_the_run_is_open(client, settings) -> None:
    import time

    from registry.models import UnmanagedRun

    settings.HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS = 4  # a beat every second
    core_v2.init(config=core_v2.Config(name="beating"), client=client)
    assert core_v2.info is not None
    row = UnmanagedRun.objects.get(run__trial_id=core_v2.info.trial.trial_id)
    first = row.heartbeat_at
    deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing assertion
    while time.monotonic() < deadline:
        row.refresh_from_db()
        if row.heartbeat_at > first:
            break
        time.sleep(0.2)
    assert row.heartbeat_at > first
    core_v2.close()
    assert Trial.objects.get(id=row.run.trial_id).state == State.COMPLETED
