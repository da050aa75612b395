"""Checkpoint metadata: the metrics reported at each checkpoint's step, ``best`` / ``latest``
flags, ``?order_by=`` / ``?state=`` on both list endpoints, bounded queries per page."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from registry import metrics
from registry.models import Checkpoint, CheckpointState
from tests.helpers_checkpoints import retention_experiment, stored_checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(tmp_path) -> dict:
    return {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"), "save_trial_latest": 100}


@pytest.fixture
def trial(api, storage):
    """A trial with checkpoints at steps 10, 20, 30, 40 and metrics around them:
    validation_loss 0.5 @10, 0.2 @20, NaN @30, none @40; training at steps 5, 15, 35."""
    trial = retention_experiment(api, storage)
    for step, loss in ((5, 1.5), (15, 1.1), (35, 0.7)):
        metrics.metrics_report(
            trial_id=trial.id,
            reports=[{"group": "training", "steps_completed": step, "metrics": {"loss": loss}}],
        )
    trial.ckpts = {
        10: stored_checkpoint(trial, 10, validation={"validation_loss": 0.5, "accuracy": 0.8}),
        20: stored_checkpoint(trial, 20, validation={"validation_loss": 0.2, "accuracy": 0.9}),
        30: stored_checkpoint(trial, 30, validation={"validation_loss": float("nan")}),
        40: stored_checkpoint(trial, 40),
    }
    return trial


def _rows(api, path: str, **params) -> list[dict]:
    response = api.get(path, params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_each_checkpoint_shows_the_metrics_at_its_step_and_its_flags(api, trial):
    rows = {r["steps_completed"]: r for r in _rows(api, f"/api/v1/trials/{trial.id}/checkpoints/")}
    assert rows[10]["validation_metrics"] == {"validation_loss": 0.5, "accuracy": 0.8}
    assert rows[10]["searcher_metric"] == 0.5
    # The latest training report at or before the step.
    assert rows[10]["training_metrics"] == {"loss": 1.5}
    assert rows[20]["training_metrics"] == {"loss": 1.1}
    assert rows[30]["training_metrics"] == {"loss": 1.1}
    assert rows[40]["training_metrics"] == {"loss": 0.7}
    # No validation at step 40; a NaN one at 30 (stored as its name).
    assert rows[40]["validation_metrics"] is None and rows[40]["searcher_metric"] is None
    assert rows[30]["searcher_metric"] == "NaN"
    assert [s for s, r in rows.items() if r["best"]] == [20]
    assert [s for s, r in rows.items() if r["latest"]] == [40]


def test_a_single_checkpoint_has_the_same_metadata(api, trial):
    body = api.get(f"/api/v1/checkpoints/{trial.ckpts[20].uuid}/").json()
    assert body["best"] is True and body["latest"] is False
    assert body["validation_metrics"]["validation_loss"] == 0.2
    assert body["training_metrics"] == {"loss": 1.1}


@pytest.mark.parametrize(
    ("order_by", "steps"),
    [
        ("steps_completed", [10, 20, 30, 40]),
        ("-steps_completed", [40, 30, 20, 10]),
        # Checkpoints with no value to rank (NaN, no validation) come last either way.
        ("searcher_metric", [20, 10, 40, 30]),
        ("-searcher_metric", [10, 20, 40, 30]),
    ],
)
@pytest.mark.parametrize("endpoint", ["trial", "experiment"])
def test_lists_are_sorted_by_order_by(api, trial, order_by, steps, endpoint):
    path = (
        f"/api/v1/trials/{trial.id}/checkpoints/"
        if endpoint == "trial"
        else f"/api/v1/experiments/{trial.experiment_id}/checkpoints/"
    )
    rows = _rows(api, path, order_by=order_by)
    got = [r["steps_completed"] for r in rows]
    if order_by.endswith("searcher_metric"):
        assert got[:2] == steps[:2] and set(got[2:]) == {30, 40}
    else:
        assert got == steps


def test_pagination_follows_the_searcher_metric_order(api, trial):
    path = f"/api/v1/experiments/{trial.experiment_id}/checkpoints/"
    first = api.get(path, {"order_by": "searcher_metric", "limit": 1}).json()
    second = api.get(path, {"order_by": "searcher_metric", "limit": 1, "offset": 1}).json()
    assert first["count"] == 4
    assert [r["steps_completed"] for r in first["results"] + second["results"]] == [20, 10]


def test_the_state_filter(api, trial):
    Checkpoint.objects.filter(uuid=trial.ckpts[10].uuid).update(state=CheckpointState.DELETED)
    path = f"/api/v1/trials/{trial.id}/checkpoints/"
    assert [r["steps_completed"] for r in _rows(api, path, state="DELETED")] == [10]
    assert len(_rows(api, path, state="COMPLETED")) == 3


@pytest.mark.parametrize(
    ("param", "value"), [("order_by", "size"), ("order_by", "searcher"), ("state", "GONE")]
)
def test_bad_parameters_are_400_naming_them(api, trial, param, value):
    for path in (
        f"/api/v1/trials/{trial.id}/checkpoints/",
        f"/api/v1/experiments/{trial.experiment_id}/checkpoints/",
    ):
        response = api.get(path, {param: value})
        assert response.status_code == 400
        assert list(response.json()["errors"]) == [param]


def test_larger_is_better_flips_best(api, storage):
    trial = retention_experiment(api, storage, metric="accuracy", smaller_is_better=False)
    low = stored_checkpoint(trial, 1, validation={"accuracy": 0.3})
    high = stored_checkpoint(trial, 2, validation={"accuracy": 0.9})
    stored_checkpoint(trial, 3, validation={"accuracy": 0.5})
    rows = _rows(api, f"/api/v1/trials/{trial.id}/checkpoints/", order_by="-searcher_metric")
    assert [r["uuid"] for r in rows][:2] == [
        str(high.uuid),
        str(trial.checkpoints.get(steps_completed=3).uuid),
    ]
    assert [r["uuid"] for r in rows if r["best"]] == [str(high.uuid)]
    assert rows[-1]["uuid"] == str(low.uuid)


def _queries(api, path: str) -> int:
    with CaptureQueriesContext(connection) as context:
        assert api.get(path).status_code == 200
    return len(context.captured_queries)


def test_a_list_page_costs_the_same_queries_for_3_or_30_checkpoints(api, storage):
    few = retention_experiment(api, storage)
    many = retention_experiment(api, storage)
    for step in range(1, 4):
        stored_checkpoint(few, step, validation={"validation_loss": 1.0 / step})
    for step in range(1, 31):
        stored_checkpoint(many, step, validation={"validation_loss": 1.0 / step})
    for order in ("", "?order_by=searcher_metric"):
        assert _queries(api, f"/api/v1/trials/{few.id}/checkpoints/{order}") == _queries(
            api, f"/api/v1/trials/{many.id}/checkpoints/{order}"
        )
        assert _queries(
            api, f"/api/v1/experiments/{few.experiment_id}/checkpoints/{order}"
        ) == _queries(api, f"/api/v1/experiments/{many.experiment_id}/checkpoints/{order}")


def _register(api, trial, steps: int, loss: float) -> tuple[dict, int]:
    """Report a validation at ``steps`` and register a checkpoint there over the API, as a
    trial's SDK does; returns the answer and the queries it took."""
    metrics.metrics_report(
        trial_id=trial.id,
        reports=[
            {"group": "validation", "steps_completed": steps, "metrics": {"validation_loss": loss}}
        ],
    )
    body = {"uuid": str(uuid.uuid4()), "steps_completed": steps, "resources": {"a.pth": 10}}
    with CaptureQueriesContext(connection) as context:
        response = api.post(f"/api/v1/trials/{trial.id}/checkpoints/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json(), len(context.captured_queries)


def test_a_registration_answers_its_flags_in_queries_that_do_not_grow_with_the_trial(api, storage):
    """The answer ranks the trial's checkpoints to say ``best`` (bench/checkpoint_io.py measures
    its cost): right against 2 or 30 earlier checkpoints, in as many queries for both."""
    few = retention_experiment(api, storage)
    many = retention_experiment(api, storage)
    for step in range(1, 3):
        stored_checkpoint(few, step, validation={"validation_loss": 1.0})
    for step in range(1, 31):
        stored_checkpoint(many, step, validation={"validation_loss": 1.0})
    worse, few_queries = _register(api, few, 40, 2.0)
    better, many_queries = _register(api, many, 40, 0.5)
    assert few_queries == many_queries
    assert (worse["best"], worse["latest"]) == (False, True)
    assert (better["best"], better["latest"]) == (True, True)
    assert better["searcher_metric"] == 0.5 and better["validation_metrics"] == {
        "validation_loss": 0.5
    }
