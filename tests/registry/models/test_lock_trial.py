"""``registry.models.lock_trial``: the trial read in plain SQL equals the ORM's row, with its
experiment, and refuses to run where its lock would end with the statement."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError

from registry.models import Experiment, Trial, lock_trial

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_reads_the_trial_and_its_experiment_as_the_orm_does(trial):
    Trial.objects.filter(id=trial.id).update(notes="kept out of the read", steps_completed=7)
    with transaction.atomic():
        locked = lock_trial(trial.id)
    stored = Trial.objects.get(id=trial.id)
    for field in Trial._meta.concrete_fields:
        assert getattr(locked, field.attname) == getattr(stored, field.attname), field.attname
    experiment = Experiment.objects.get(id=trial.experiment_id)
    assert locked.experiment.config == experiment.config
    assert locked.experiment.owner_id == experiment.owner_id


def test_it_is_refused_outside_a_transaction(trial):
    with pytest.raises(TransactionManagementError, match="outside of a transaction"):
        lock_trial(trial.id)


def test_an_unknown_trial_is_does_not_exist(trial):
    with transaction.atomic(), pytest.raises(Trial.DoesNotExist):
        lock_trial(trial.id + 1000)


def test_a_lifecycle_write_through_it_keeps_and_answers_the_fields_it_did_not_read(trial):
    from registry import lifecycle
    from registry.models import State

    Trial.objects.filter(id=trial.id).update(notes="lr too high?", state=State.ACTIVE)
    paused = lifecycle.trial_pause(trial_id=trial.id)
    assert paused.state == State.PAUSED
    assert paused.notes == "lr too high?"  # deferred by the read, loaded when read
    stored = Trial.objects.get(id=trial.id)
    assert (stored.state, stored.notes) == (State.PAUSED, "lr too high?")
