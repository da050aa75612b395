"""MLflow's own client (``mlflow-skinny``) against the live server's MLflow-compatible API:
experiments, runs, params, tags, metrics with steps, searches, status mapping, artifacts, and
the authorization rules; what is not mapped answers in MLflow's error format."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

mlflow = pytest.importorskip("mlflow")
from mlflow.entities import Metric, Param, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from registry.models import Experiment, MetricReport, State, Trial  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def _code(exc: pytest.ExceptionInfo[MlflowException]) -> str:
    return exc.value.error_code


@pytest.fixture
def tracking(live_server, api, settings, tmp_path, monkeypatch) -> Iterator[str]:
    """MLFLOW_TRACKING_URI/TOKEN set to the live server and alice's token; storage in tmp."""
    settings.HEADWAY_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", live_server.url)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", api.token)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")
    mlflow.set_tracking_uri(live_server.url)
    yield live_server.url
    while mlflow.active_run() is not None:
        mlflow.end_run()


@pytest.fixture
def bob_token(django_user_model) -> str:
    from rest_framework.authtoken.models import Token

    bob = django_user_model.objects.create_user("bob", password="pw-bob")
    return Token.objects.create(user=bob).key


def test_a_training_script_logs_through_the_fluent_api(tracking, tmp_path) -> None:
    experiment_id = mlflow.create_experiment("mlflow-fluent")
    assert mlflow.get_experiment_by_name("mlflow-fluent").experiment_id == experiment_id
    mlflow.set_experiment("mlflow-fluent")  # found by name, not created again
    with mlflow.start_run(run_name="first") as run:
        mlflow.log_param("lr", 0.1)
        mlflow.log_params({"batch_size": 32, "optimizer": "sgd"})
        mlflow.set_tag("team", "vision")
        mlflow.set_tags({"stage": "dev", "seed": 1})
        for step in range(3):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            mlflow.log_metric("acc", 0.5 + step / 10, step=step)  # same step: merged, not lost
        mlflow.log_metrics({"val_loss": 0.7, "eval_acc": 0.8}, step=2)
        artifact = tmp_path / "notes.txt"
        artifact.write_text("hello artifacts")
        mlflow.log_artifact(str(artifact))
        mlflow.log_artifact(str(artifact), artifact_path="sub/dir")
        run_id = run.info.run_id

    trial = Trial.objects.select_related("experiment").get(id=int(run_id))
    assert trial.experiment_id == int(experiment_id) and trial.experiment.unmanaged
    assert trial.state == State.COMPLETED  # the context manager's FINISHED
    assert trial.hparams == {"lr": "0.1", "batch_size": "32", "optimizer": "sgd"}
    assert trial.labels["team"] == "vision" and trial.labels["mlflow.runName"] == "first"
    rows = MetricReport.objects.filter(trial=trial).order_by("group", "steps_completed")
    stored = [(r.group, r.steps_completed, r.metrics) for r in rows]
    assert stored == [
        ("training", 0, {"loss": 1.0, "acc": 0.5}),
        ("training", 1, {"loss": 0.5, "acc": 0.6}),
        ("training", 2, {"loss": 1 / 3, "acc": 0.7}),
        ("validation", 2, {"val_loss": 0.7, "eval_acc": 0.8}),
    ]

    client = MlflowClient()
    got = client.get_run(run_id)
    assert got.info.status == "FINISHED" and got.info.run_name == "first"
    assert got.data.params == {"lr": "0.1", "batch_size": "32", "optimizer": "sgd"}
    assert got.data.metrics == {"loss": 1 / 3, "acc": 0.7, "val_loss": 0.7, "eval_acc": 0.8}
    assert got.data.tags["stage"] == "dev" and got.data.tags["seed"] == "1"
    history = client.get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.5), (2, 1 / 3)]
    assert all(m.timestamp > 0 for m in history)

    out = Path(mlflow.artifacts.download_artifacts(run_id=run_id, dst_path=str(tmp_path / "dl")))
    assert (out / "notes.txt").read_text() == "hello artifacts"
    assert (out / "sub" / "dir" / "notes.txt").read_text() == "hello artifacts"
    listed = {f.path: f.is_dir for f in client.list_artifacts(run_id)}
    assert listed == {"notes.txt": False, "sub": True}


def test_log_batch_search_and_status_mapping(tracking) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("mlflow-search")
    runs = {}
    for name, lr, acc in (("a", "0.1", 0.9), ("b", "0.01", 0.6), ("c", "0.1", 0.3)):
        run = client.create_run(experiment_id, run_name=name, tags={"kind": "sweep"})
        client.log_batch(
            run.info.run_id,
            metrics=[Metric("acc", acc, 1_700_000_000_000, 5), Metric("loss", 1 - acc, 0, 5)],
            params=[Param("lr", lr)],
            tags=[RunTag("name_tag", name)],
        )
        runs[name] = run.info.run_id
    client.set_terminated(runs["a"], "FINISHED")
    client.set_terminated(runs["b"], "FAILED")
    client.set_terminated(runs["c"], "KILLED")
    states = dict(Trial.objects.filter(id__in=map(int, runs.values())).values_list("id", "state"))
    assert [states[int(runs[n])] for n in "abc"] == [State.COMPLETED, State.ERROR, State.CANCELED]
    assert [client.get_run(runs[n]).info.status for n in "abc"] == ["FINISHED", "FAILED", "KILLED"]

    found = client.search_runs(
        [experiment_id], "metrics.acc > 0.5 and params.lr = '0.1'", order_by=["metrics.acc DESC"]
    )
    assert [r.info.run_name for r in found] == ["a"]
    found = client.search_runs([experiment_id], "tags.kind = 'sweep'", order_by=["metrics.acc ASC"])
    assert [r.info.run_name for r in found] == ["c", "b", "a"]
    found = client.search_runs([experiment_id], "attributes.status = 'FAILED'")
    assert [r.info.run_name for r in found] == ["b"]
    with pytest.raises(MlflowException) as bad:
        client.search_runs([experiment_id], "metrics.acc > 0.5 OR params.lr = '0.1'")
    assert _code(bad) == "INVALID_PARAMETER_VALUE"
    page = client.search_runs([experiment_id], "", order_by=["params.lr"], max_results=2)
    assert len(page) == 2 and page.token
    rest = client.search_runs([experiment_id], "", order_by=["params.lr"], page_token=page.token)
    assert {r.info.run_id for r in [*page, *rest]} == set(runs.values())

    # A param keeps its first value (MLflow's rule); the history of an unknown key is empty.
    with pytest.raises(MlflowException) as changed:
        client.log_param(runs["a"], "lr", "0.5")
    assert _code(changed) == "INVALID_PARAMETER_VALUE"
    assert client.get_metric_history(runs["a"], "nope") == []
    client.delete_tag(runs["a"], "name_tag")
    assert "name_tag" not in client.get_run(runs["a"]).data.tags

    experiments = client.search_experiments(filter_string="name = 'mlflow-search'")
    assert [e.experiment_id for e in experiments] == [experiment_id]
    client.rename_experiment(experiment_id, "mlflow-renamed")
    assert client.get_experiment(experiment_id).name == "mlflow-renamed"
    client.delete_experiment(experiment_id)
    assert client.get_experiment(experiment_id).lifecycle_stage == "deleted"
    assert Experiment.objects.get(id=int(experiment_id)).state in (State.DELETING, State.DELETED)


def test_another_users_token_reads_but_cannot_write(tracking, bob_token, monkeypatch) -> None:
    client = MlflowClient()
    experiment_id = client.create_experiment("alices")
    run_id = client.create_run(experiment_id).info.run_id
    client.log_metric(run_id, "loss", 0.5, step=1)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", bob_token)
    assert client.get_run(run_id).data.metrics == {"loss": 0.5}  # everyone reads (registry.authz)
    assert client.get_experiment_by_name("alices") is None  # names are per user
    for write in (
        lambda: client.log_metric(run_id, "loss", 0.1, step=2),
        lambda: client.log_param(run_id, "lr", "1"),
        lambda: client.set_tag(run_id, "k", "v"),
        lambda: client.set_terminated(run_id, "FAILED"),
        lambda: client.create_run(experiment_id),
        lambda: client.delete_experiment(experiment_id),
        lambda: client.rename_experiment(experiment_id, "bobs"),
    ):
        with pytest.raises(MlflowException) as denied:
            write()
        assert _code(denied) == "PERMISSION_DENIED"
    with pytest.raises(MlflowException) as missing:
        client.get_run("999999")
    assert _code(missing) == "RESOURCE_DOES_NOT_EXIST"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "not-a-token")
    with pytest.raises(MlflowException) as unknown:
        client.get_run(run_id)
    assert _code(unknown) == "UNAUTHENTICATED"
    assert Trial.objects.get(id=int(run_id)).state == State.ACTIVE


def test_unmapped_calls_answer_in_mlflows_format(tracking, api, tmp_path) -> None:
    client = MlflowClient()
    run_id = client.create_run("0").info.run_id  # MLflow's default experiment: alice's "Default"
    assert client.get_experiment("0").name == "Default"
    with pytest.raises(MlflowException) as deleted:
        client.delete_run(run_id)
    assert _code(deleted) == "NOT_IMPLEMENTED" and "delete the experiment" in deleted.value.message
    with pytest.raises(MlflowException) as tags:
        client.set_experiment_tag("0", "k", "v")
    assert _code(tags) == "NOT_IMPLEMENTED"
    with pytest.raises(MlflowException) as located:
        client.create_experiment("elsewhere", artifact_location=str(tmp_path))
    assert _code(located) == "INVALID_PARAMETER_VALUE"
    with pytest.raises(MlflowException) as step:
        client.log_metric(run_id, "loss", 1.0, step=-1)
    assert _code(step) == "INVALID_PARAMETER_VALUE"
    client.log_metric(run_id, "loss", math.nan, step=0)
    assert math.isnan(client.get_metric_history(run_id, "loss")[0].value)

    headers = {"Authorization": f"Bearer {api.token}"}
    unknown = requests.post(f"{tracking}/api/2.0/mlflow/runs/frobnicate", json={}, headers=headers)
    assert unknown.status_code == 404
    assert unknown.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    inputs = requests.post(f"{tracking}/api/2.0/mlflow/runs/log-inputs", json={}, headers=headers)
    assert (inputs.status_code, inputs.json()["error_code"]) == (501, "NOT_IMPLEMENTED")
    anonymous = requests.get(f"{tracking}/api/2.0/mlflow/runs/get", params={"run_id": run_id})
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, "UNAUTHENTICATED")
    base = f"{tracking}/api/2.0/mlflow-artifacts/artifacts"
    experiment_id = client.get_run(run_id).info.experiment_id
    for path in (
        f"{experiment_id}/{run_id}/artifacts/../../x",
        f"{experiment_id}/{run_id}/elsewhere/x",
        f"{int(experiment_id) + 1}/{run_id}/artifacts/x",
    ):
        answer = requests.put(f"{base}/{path}", data=b"x", headers=headers)
        assert answer.status_code in (400, 404), path
        assert answer.json()["error_code"] in ("INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST")


def test_the_example_script_runs_unchanged(live_server, api, settings, tmp_path) -> None:
    """examples/mlflow/train.py in its own process, configured by the two variables only."""
    import os
    import subprocess
    import sys

    settings.HEADWAY_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    script = Path(__file__).resolve().parents[3] / "examples" / "mlflow" / "train.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "HEADWAY_"))}
    env |= {
        "MLFLOW_TRACKING_URI": live_server.url,
        "MLFLOW_TRACKING_TOKEN": api.token,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trial = Trial.objects.get(experiment__name="mlflow-example")
    assert trial.state == State.COMPLETED and trial.hparams["lr"] == "0.05"
    assert set(trial.summary_metrics) == {"training", "validation"}
    assert trial.summary_metrics["training"]["loss"]["count"] == 36  # 3 epochs of 12 batches
    assert trial.summary_metrics["validation"]["val_loss"]["count"] == 3
    folder = tmp_path / "checkpoints" / ".mlflow-artifacts" / str(trial.id) / "weights"
    assert (folder / "model.pt").stat().st_size > 0


def test_writes_heartbeat_the_run_and_a_silent_run_is_lost(tracking, api, monkeypatch) -> None:
    from datetime import timedelta

    from registry import lifecycle
    from registry.models import TrialRun, UnmanagedRun

    client = MlflowClient()
    run_id = client.create_run("0").info.run_id
    beat = UnmanagedRun.objects.get(run__trial_id=int(run_id))
    earlier = beat.heartbeat_at - timedelta(seconds=60)
    UnmanagedRun.objects.filter(pk=beat.pk).update(heartbeat_at=earlier)
    client.log_metric(run_id, "loss", 0.5, step=1)
    assert UnmanagedRun.objects.get(pk=beat.pk).heartbeat_at > earlier

    # A trial's run token is not a user token: the MLflow API refuses it.
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TrialRun.objects.get(trial_id=int(run_id)).token)
    with pytest.raises(MlflowException) as refused:
        client.get_run(run_id)
    assert _code(refused) == "PERMISSION_DENIED"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", api.token)

    lifecycle.reap_lost_unmanaged_runs(timeout=timedelta(0))
    assert Trial.objects.get(id=int(run_id)).state == State.ERROR
    assert client.get_run(run_id).info.status == "FAILED"


def test_a_managed_trial_reads_as_a_run_but_keeps_its_params_and_state(tracking, trial) -> None:
    """A pool-launched trial (alice's) is visible as a run; only its metrics are hers to log."""
    client = MlflowClient()
    run_id = str(trial.id)
    assert client.get_run(run_id).info.status == "SCHEDULED"  # its run is queued
    for write in (
        lambda: client.log_param(run_id, "lr", "1"),
        lambda: client.set_tag(run_id, "k", "v"),
        lambda: client.set_terminated(run_id, "FINISHED"),
        lambda: client.create_run(str(trial.experiment_id)),
    ):
        with pytest.raises(MlflowException) as refused:
            write()
        assert _code(refused) == "INVALID_PARAMETER_VALUE"
    client.log_metric(run_id, "loss", 0.25, step=3)
    assert client.get_run(run_id).data.metrics == {"loss": 0.25}
    assert Trial.objects.get(id=trial.id).state == State.ACTIVE


def test_deleting_an_experiment_waits_for_its_runs_to_end(tracking, tmp_path) -> None:
    from registry import lifecycle

    client = MlflowClient()
    empty = client.create_experiment("empty")
    client.delete_experiment(empty)  # no run: ended CANCELED, then deleted
    assert client.get_experiment(empty).lifecycle_stage == "deleted"
    assert client.get_experiment_by_name("empty") is None
    assert client.create_experiment("empty") != empty  # the name is free again

    busy = client.create_experiment("busy")
    run_id = client.create_run(busy).info.run_id
    with pytest.raises(MlflowException) as conflict:
        client.delete_experiment(busy)
    assert _code(conflict) == "RESOURCE_CONFLICT"
    (tmp_path / "weights.bin").write_bytes(b"\x00" * 10)
    client.log_artifact(run_id, str(tmp_path / "weights.bin"))
    folder = tmp_path / "checkpoints" / ".mlflow-artifacts" / run_id
    assert (folder / "weights.bin").exists()
    client.set_terminated(run_id)
    client.delete_experiment(busy)
    assert client.get_experiment(busy).lifecycle_stage == "deleted"
    deleted = client.search_experiments(view_type=mlflow.entities.ViewType.DELETED_ONLY)
    assert {empty, busy} <= {e.experiment_id for e in deleted}
    with pytest.raises(MlflowException) as gone:
        client.create_run(busy)
    assert _code(gone) == "INVALID_PARAMETER_VALUE"
    # The master worker's deletion task: the run's artifacts go with the experiment.
    assert lifecycle.experiment_delete_run(experiment_id=int(busy))
    assert not folder.exists() and not Experiment.objects.filter(id=int(busy)).exists()
    with pytest.raises(MlflowException) as missing:
        client.get_experiment(busy)
    assert _code(missing) == "RESOURCE_DOES_NOT_EXIST"
