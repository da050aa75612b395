"""Checkpoint retention (GC): the policy table, files really removed (shared_fs and S3 over
moto's server), protections (warm-start, model versions, a resumable trial's latest), orphans
with their grace period, and one real Core API trial through a Celery worker."""

from __future__ import annotations

import math
import os
import time
from datetime import UTC, datetime, timedelta

import pytest

from headway.expconf import ConfigError, parse_experiment_config
from headway.storage import build_storage_manager
from registry.checkpoints import CheckpointFacts, RetentionPolicy, checkpoints_to_keep
from registry.lifecycle import checkpoint_gc, delete_orphans
from registry.models import (
    Checkpoint,
    CheckpointState,
    ModelVersion,
    RegisteredModel,
    State,
    Trial,
)
from tests.helpers import reload
from tests.helpers_checkpoints import (
    end_trial,
    retention_experiment,
    s3_storage,
    stored_checkpoint,
    unregistered_checkpoint,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# -- the policy, pure ---------------------------------------------------------------------------

# Two trials, checkpoints "<trial><step>": trial 1 at steps 1..4, trial 2 at steps 1..3.
# Searcher metric (smaller is better) of the validation at each checkpoint's step; None = no
# validation at that step, NaN = a validation whose value is not a number.
METRICS = {
    "a1": 0.9,
    "a2": 0.2,
    "a3": None,
    "a4": 0.5,
    "b1": 0.3,
    "b2": math.nan,
    "b3": 0.1,
}


def _facts(values: dict[str, float | None]) -> list[CheckpointFacts]:
    return [
        CheckpointFacts(
            uuid=name,
            trial_id=1 if name[0] == "a" else 2,
            steps_completed=int(name[1]),
            created_at=T0 + timedelta(minutes=int(name[1])),
            searcher_value=value,
        )
        for name, value in values.items()
    ]


@pytest.mark.parametrize(
    ("policy", "smaller_is_better", "kept"),
    [
        # Determined's defaults: each trial's latest and its best.
        (RetentionPolicy(0, 1, 1), True, {"a4", "a2", "b3"}),
        # Only the latest: a4, b3.
        (RetentionPolicy(0, 0, 1), True, {"a4", "b3"}),
        # Nothing kept at all.
        (RetentionPolicy(0, 0, 0), True, set()),
        # The experiment's two best (b3 0.1, a2 0.2), nothing per trial.
        (RetentionPolicy(2, 0, 0), True, {"b3", "a2"}),
        # Latest two per trial plus the experiment's best.
        (RetentionPolicy(1, 0, 2), True, {"a4", "a3", "b3", "b2"}),
        # Larger is better: trial bests a1 (0.9) and b1 (0.3); experiment best a1.
        (RetentionPolicy(1, 1, 0), False, {"a1", "b1"}),
        # Best slots never go to unvalidated (a3) or NaN (b2) checkpoints, however many.
        (RetentionPolicy(0, 10, 0), True, {"a1", "a2", "a4", "b1", "b3"}),
        # More than there are: everything.
        (RetentionPolicy(0, 0, 10), True, set(METRICS)),
    ],
)
def test_the_policy_keeps_exactly_the_union_of_latest_and_best(policy, smaller_is_better, kept):
    keep = checkpoints_to_keep(_facts(METRICS), policy, smaller_is_better=smaller_is_better)
    assert keep == kept


def test_ties_of_the_searcher_metric_keep_the_later_step():
    facts = _facts({"a1": 0.5, "a2": 0.5, "a3": 0.7})
    assert checkpoints_to_keep(facts, RetentionPolicy(0, 1, 0), smaller_is_better=True) == {"a2"}


def test_a_stored_config_without_retention_fields_keeps_everything():
    assert RetentionPolicy.from_storage_config({"type": "shared_fs"}) is None
    assert RetentionPolicy.from_storage_config(
        {"type": "shared_fs", "save_trial_latest": 3}
    ) == RetentionPolicy(0, 1, 3)


# -- the config ---------------------------------------------------------------------------------

MINIMAL = {
    "entrypoint": "python train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": 10},
}


def test_retention_fields_are_accepted_with_determined_s_defaults():
    config = parse_experiment_config({**MINIMAL, "checkpoint_storage": {"type": "shared_fs"}})
    storage = config.to_dict()["checkpoint_storage"]
    assert (storage["save_experiment_best"], storage["save_trial_best"]) == (0, 1)
    assert storage["save_trial_latest"] == 1
    s3 = {"type": "s3", "bucket": "bkt", "save_experiment_best": 2, "save_trial_latest": 0}
    stored = parse_experiment_config({**MINIMAL, "checkpoint_storage": s3}).to_dict()
    assert stored["checkpoint_storage"]["save_experiment_best"] == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [(-1, "must be >= 0"), ("2", "expected an integer"), (1.5, "expected an integer")],
)
@pytest.mark.parametrize("field", ["save_experiment_best", "save_trial_best", "save_trial_latest"])
def test_bad_retention_values_are_refused_naming_the_field(field, value, message):
    storage = {"type": "shared_fs", field: value}
    with pytest.raises(ConfigError) as info:
        parse_experiment_config({**MINIMAL, "checkpoint_storage": storage})
    errors = info.value.errors
    assert list(errors) == [f"checkpoint_storage.{field}"]
    assert message in errors[f"checkpoint_storage.{field}"][0]


# -- a GC pass over stored checkpoints ------------------------------------------------------------


def _shared_fs(tmp_path, **policy) -> dict:
    return {"type": "shared_fs", "host_path": str(tmp_path / "ckpts"), **policy}


@pytest.fixture(params=["shared_fs", "s3"])
def storage(request, tmp_path):
    """A ``checkpoint_storage`` factory: a fresh directory, or a fresh bucket on moto's server."""
    if request.param == "shared_fs":
        return lambda **policy: _shared_fs(tmp_path, **policy)
    endpoint = request.getfixturevalue("s3_endpoint")
    return lambda **policy: s3_storage(endpoint, **policy)


def _in_storage(checkpoint: Checkpoint) -> bool:
    return build_storage_manager(checkpoint.storage).exists(str(checkpoint.uuid))


@pytest.mark.django_db
def test_gc_deletes_the_files_of_what_the_policy_drops_and_keeps_deleted_rows(api, storage):
    trial = retention_experiment(api, storage(save_trial_best=1, save_trial_latest=1))
    losses = [0.9, 0.2, 0.4, 0.6]
    checkpoints = [
        stored_checkpoint(trial, steps=i + 1, validation={"validation_loss": loss})
        for i, loss in enumerate(losses)
    ]
    end_trial(trial)
    assert reload(trial).state == State.COMPLETED

    result = checkpoint_gc(experiment_id=trial.experiment_id)

    kept = {str(checkpoints[1].uuid), str(checkpoints[3].uuid)}  # best (0.2) and latest
    assert sorted(result.deleted) == sorted(
        str(c.uuid) for c in checkpoints if str(c.uuid) not in kept
    )
    for checkpoint in checkpoints:
        checkpoint.refresh_from_db()
        gone = str(checkpoint.uuid) not in kept
        assert checkpoint.state == (CheckpointState.DELETED if gone else CheckpointState.COMPLETED)
        assert _in_storage(checkpoint) is not gone
    # A second pass has nothing left to do.
    assert checkpoint_gc(experiment_id=trial.experiment_id).deleted == []


@pytest.mark.django_db
def test_a_trial_s_latest_checkpoint_is_kept_while_it_may_resume(api, tmp_path):
    trial = retention_experiment(api, _shared_fs(tmp_path, save_trial_best=0, save_trial_latest=0))
    older = stored_checkpoint(trial, steps=1)
    latest = stored_checkpoint(trial, steps=2)
    # The trial is still ACTIVE: only its latest (what a resume restores) survives.
    assert checkpoint_gc(experiment_id=trial.experiment_id).deleted == [str(older.uuid)]
    end_trial(trial)
    # Trial and experiment ended: with nothing to keep, the latest goes too.
    assert checkpoint_gc(experiment_id=trial.experiment_id).deleted == [str(latest.uuid)]
    assert not _in_storage(reload(latest))


@pytest.mark.django_db
def test_warm_start_sources_and_registered_checkpoints_are_never_collected(api, tmp_path, user):
    trial = retention_experiment(api, _shared_fs(tmp_path, save_trial_best=0, save_trial_latest=0))
    source = stored_checkpoint(trial, steps=1)
    registered = stored_checkpoint(trial, steps=2)
    plain = stored_checkpoint(trial, steps=3)
    end_trial(trial)
    model = RegisteredModel.objects.create(name="digits", owner=user)
    ModelVersion.objects.create(model=model, version=1, checkpoint=registered, owner=user)
    # Continue the trial from the first checkpoint: a new experiment warm-starts from it.
    response = api.post(
        f"/api/v1/trials/{trial.id}/continue/", {"checkpoint": str(source.uuid)}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    continued = Trial.objects.get(experiment_id=response.json()["id"])
    assert continued.warm_start_checkpoint == source.uuid

    result = checkpoint_gc(experiment_id=trial.experiment_id)

    assert result.deleted == [str(plain.uuid)]
    for kept in (source, registered):
        assert reload(kept).state == CheckpointState.COMPLETED and _in_storage(kept)


@pytest.mark.django_db
def test_experiments_stored_before_retention_keep_every_checkpoint(api, tmp_path):
    trial = retention_experiment(api, _shared_fs(tmp_path, save_trial_latest=0, save_trial_best=0))
    experiment = trial.experiment
    for name in ("save_experiment_best", "save_trial_best", "save_trial_latest"):
        experiment.config["checkpoint_storage"].pop(name)
    experiment.save(update_fields=["config"])
    checkpoints = [stored_checkpoint(trial, steps=s) for s in (1, 2, 3)]
    end_trial(trial)
    assert checkpoint_gc(experiment_id=experiment.id).deleted == []
    assert all(_in_storage(reload(c)) for c in checkpoints)


@pytest.mark.django_db
def test_a_failed_delete_is_delete_failed_and_retried_by_the_next_pass(api, tmp_path):
    trial = retention_experiment(api, _shared_fs(tmp_path, save_trial_best=0, save_trial_latest=1))
    doomed = stored_checkpoint(trial, steps=1)
    stored_checkpoint(trial, steps=2)
    end_trial(trial)
    # Storage the registry cannot use (a relative host_path) fails the delete.
    Checkpoint.objects.filter(uuid=doomed.uuid).update(
        storage={"type": "shared_fs", "host_path": "rel"}
    )
    result = checkpoint_gc(experiment_id=trial.experiment_id)
    assert (
        list(result.failed) == [str(doomed.uuid)] and "host_path" in result.failed[str(doomed.uuid)]
    )
    assert reload(doomed).state == CheckpointState.DELETE_FAILED
    Checkpoint.objects.filter(uuid=doomed.uuid).update(
        storage=trial.experiment.config["checkpoint_storage"]
    )
    assert checkpoint_gc(experiment_id=trial.experiment_id).deleted == [str(doomed.uuid)]
    assert reload(doomed).state == CheckpointState.DELETED and not _in_storage(doomed)


@pytest.mark.django_db
def test_gc_on_request_is_queued_for_the_owner_only(api, tmp_path, django_user_model):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    trial = retention_experiment(api, _shared_fs(tmp_path))
    path = f"/api/v1/experiments/{trial.experiment_id}/checkpoints/gc/"
    other = APIClient()
    stranger = django_user_model.objects.create_user("mallory", password="pw")
    other.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=stranger).key}")
    assert other.post(path).status_code == 403
    response = api.post(path)
    assert response.status_code == 202 and "queued" in response.json()["detail"]
    assert api.post("/api/v1/experiments/999999/checkpoints/gc/").status_code == 404


# -- orphans ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_orphans_are_removed_only_after_the_grace_period(storage):
    config = storage()
    manager = build_storage_manager(config)
    orphan = unregistered_checkpoint(config, trial_id=7)
    # Not a uuid: not Headway's, never touched.
    with manager.store_path("notes") as path:
        (path / "readme.txt").write_text("mine")
    # Uuid-named, but written by another experiment's trial, or with no trial in its marker.
    foreign, anonymous = (
        unregistered_checkpoint(config, trial_id=8),
        unregistered_checkpoint(config, trial_id=None),
    )
    now = datetime.now(UTC)
    # Written just now: an upload that may still be registering.
    assert delete_orphans(config, trial_ids={7}, grace=timedelta(hours=1), now=now) == []
    assert manager.exists(orphan)
    # An hour later it is an orphan.
    later = now + timedelta(hours=2)
    assert delete_orphans(config, trial_ids={7}, grace=timedelta(hours=1), now=later) == [orphan]
    assert not manager.exists(orphan) and manager.exists("notes")
    assert manager.exists(foreign) and manager.exists(anonymous)


@pytest.mark.django_db
def test_a_gc_pass_removes_old_orphans_but_not_registered_checkpoints(api, tmp_path, settings):
    settings.HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS = 60
    trial = retention_experiment(api, _shared_fs(tmp_path, save_trial_latest=5))
    registered = stored_checkpoint(trial, steps=1)
    config = trial.experiment.config["checkpoint_storage"]
    old, fresh = (
        unregistered_checkpoint(config, trial.id),
        unregistered_checkpoint(config, trial.id),
    )
    base = build_storage_manager(config).base_path
    assert base == tmp_path / "ckpts"
    past = time.time() - 3600
    for path in [
        base / old,
        *(base / old).rglob("*"),
        base / str(registered.uuid),
        *(base / str(registered.uuid)).rglob("*"),
    ]:
        os.utime(path, (past, past))
    result = checkpoint_gc(experiment_id=trial.experiment_id)
    assert result.orphans == [old]
    assert not (base / old).exists() and (base / fresh).exists()
    assert _in_storage(registered)
