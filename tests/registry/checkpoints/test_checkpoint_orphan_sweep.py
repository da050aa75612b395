"""The periodic orphan sweep (``registry.lifecycle._orphans``, ``headway.checkpoint_orphan_sweep``
sent by the master worker's beat): on shared_fs and on S3 (moto's server) it deletes an ended
experiment's unregistered checkpoint files once past the grace period, and nothing else; a
storage that cannot be listed is skipped; the beat schedule holds it at the configured interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from headway.storage import build_storage_manager
from registry.lifecycle import checkpoint_orphan_sweep
from registry.models import State
from tests.helpers import REPO, reload
from tests.helpers_checkpoints import (
    allow_storage,
    end_trial,
    retention_experiment,
    s3_storage,
    stored_checkpoint,
    unregistered_checkpoint,
)


@pytest.fixture(params=["shared_fs", "s3"])
def place(request, tmp_path) -> dict:
    """A ``checkpoint_storage``: a fresh folder, or a fresh bucket on moto's server."""
    if request.param == "shared_fs":
        return {"type": "shared_fs", "host_path": str(tmp_path / "ckpts")}
    return s3_storage(request.getfixturevalue("s3_endpoint"))


@pytest.mark.django_db
def test_the_sweep_deletes_only_old_unregistered_files_of_ended_trials_storing_there(
    api, place, settings
):
    settings.HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS = 2
    trial = retention_experiment(api, place)
    registered = stored_checkpoint(trial, steps=1)
    end_trial(trial)
    assert reload(trial.experiment).state == State.COMPLETED
    # An experiment storing in the same place whose trial has not ended, and an ended one
    # storing elsewhere.
    running = retention_experiment(api, place)
    elsewhere = retention_experiment(api, {**place, "storage_path": "elsewhere"})
    end_trial(elsewhere)
    manager = build_storage_manager(place)
    with manager.store_path("notes") as path:  # not a uuid: not Headway's
        (path / "readme.txt").write_text("mine")
    orphan = unregistered_checkpoint(place, trial.id)
    kept = {
        "registered": str(registered.uuid),
        "no trial of ours (a deleted experiment's)": unregistered_checkpoint(place, 10**9),
        "no trial at all": unregistered_checkpoint(place, None),
        "a trial storing elsewhere": unregistered_checkpoint(place, elsewhere.id),
    }
    unended = unregistered_checkpoint(place, running.id)
    # S3 cannot backdate an object (LastModified, in whole seconds): wait past the grace.
    time.sleep(3)
    kept["younger than the grace"] = unregistered_checkpoint(place, trial.id)
    now = timezone.now()

    result = checkpoint_orphan_sweep(now=now)

    assert result.deleted == [orphan] and result.failed == 0
    assert not manager.exists(orphan)
    assert manager.exists("notes")
    assert {why: manager.exists(sid) for why, sid in kept.items()} == dict.fromkeys(kept, True)
    assert manager.exists(unended)
    # Once that trial has ended, the next pass takes its orphan too.
    end_trial(running)
    assert checkpoint_orphan_sweep(now=now).deleted == [unended]
    assert not manager.exists(unended)


@pytest.mark.django_db
def test_a_storage_that_fails_to_list_is_logged_and_skipped(
    api, tmp_path, settings, s3_endpoint, caplog
):
    from registry.tasks import checkpoint_orphan_sweep as task

    settings.HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS = 60
    # A location whose bucket does not exist: listing it fails (NoSuchBucket).
    allow_storage({"type": "s3", "bucket": "no-such-bucket-h7", "endpoint_url": s3_endpoint})
    place = {"type": "shared_fs", "host_path": str(tmp_path / "ckpts")}
    trial = retention_experiment(api, place)
    end_trial(trial)
    orphan = unregistered_checkpoint(place, trial.id)
    folder = build_storage_manager(place).base_path / orphan
    past = time.time() - 3600
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (past, past))

    task.apply()  # the beat's task, run here

    assert not folder.exists()
    assert "no-such-bucket-h7" in caplog.text and "for orphans failed" in caplog.text


SCHEDULE = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps(s.CELERY_BEAT_SCHEDULE['checkpoint-orphan-sweep']))"
)


def _beat_entry(tmp_path, **env: str) -> subprocess.CompletedProcess:
    """Load config.settings in a fresh interpreter with ``env``; print the sweep's beat entry."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DATABASE_URL")}
    base.update(DJANGO_SETTINGS_MODULE="config.settings", HEADWAY_VAR_DIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "-c", SCHEDULE], cwd=REPO, env=base, capture_output=True, text=True
    )


def test_the_beat_schedule_sends_the_sweep_at_the_configured_interval(tmp_path, settings):
    from config.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["checkpoint-orphan-sweep"]
    assert entry["task"] == "headway.checkpoint_orphan_sweep"
    assert entry["schedule"] == float(settings.HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS) == 3600.0
    app.loader.import_default_modules()
    assert "headway.checkpoint_orphan_sweep" in app.tasks

    configured = _beat_entry(
        tmp_path, HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS="900", HEADWAY_QUEUE="sweeps"
    )
    assert configured.returncode == 0, configured.stderr
    assert json.loads(configured.stdout) == {
        "task": "headway.checkpoint_orphan_sweep",
        "schedule": 900.0,
        "options": {"queue": "sweeps", "expires": 900},
    }
    refused = _beat_entry(tmp_path, HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS="10")
    assert refused.returncode != 0
    assert "HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS must be at least 60" in refused.stderr
