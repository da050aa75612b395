"""``Experiment.objects.not_deleted()``, ``Trial.objects.not_deleted()`` and
``Experiment.is_deleted``: experiments being deleted or deleted are left out, DELETE_FAILED ones
stay, and the filter composes with the workspace scoping of ``registry.authz``."""

from __future__ import annotations

import pytest

from registry.authz import scoped
from registry.models import Experiment, State, Trial
from tests.helpers import create_experiment

pytestmark = pytest.mark.django_db


def test_not_deleted_leaves_out_deleting_and_deleted_only(api, user):
    ids = {state: create_experiment(api).json()["id"] for state in State}
    for state, experiment_id in ids.items():
        Experiment.objects.filter(id=experiment_id).update(state=state)
    gone = {ids[State.DELETING], ids[State.DELETED]}
    kept = set(ids.values()) - gone

    assert set(Experiment.objects.not_deleted().values_list("id", flat=True)) == kept
    # Same rows whichever comes first, the authorization scope or the filter.
    assert set(scoped(Experiment.objects.not_deleted(), user).values_list("id", flat=True)) == kept
    assert (
        set(scoped(Experiment.objects.all(), user).not_deleted().values_list("id", flat=True))
        == kept
    )
    trials = Trial.objects.not_deleted().values_list("experiment_id", flat=True)
    assert set(trials) == kept
    assert {e.id for e in Experiment.objects.all() if e.is_deleted} == gone
