"""``Experiment.offer_best_validation``: the experiment's best only ever improves, also when the
offering trial read the experiment before another trial stored a better value."""

from __future__ import annotations

import pytest

from registry.models import Experiment

pytestmark = pytest.mark.django_db


def _stale_copy(trial) -> Experiment:
    return Experiment.objects.get(id=trial.experiment_id)


def test_a_worse_value_from_a_stale_row_does_not_overwrite_a_better_one(trial):
    first, second = _stale_copy(trial), _stale_copy(trial)  # both read best_validation None
    smaller = first.smaller_is_better
    better, worse = (0.29, 0.34) if smaller else (0.34, 0.29)
    assert first.offer_best_validation(better) is True
    assert second.best_validation is None  # stale: it never saw the first offer
    assert second.offer_best_validation(worse) is False
    assert Experiment.objects.get(id=trial.experiment_id).best_validation == better


def test_a_better_value_replaces_the_stored_one(trial):
    experiment = _stale_copy(trial)
    step = -0.1 if experiment.smaller_is_better else 0.1
    assert experiment.offer_best_validation(0.5) is True
    assert experiment.offer_best_validation(0.5 + step) is True
    assert experiment.offer_best_validation(0.5) is False  # no longer better
    assert Experiment.objects.get(id=trial.experiment_id).best_validation == pytest.approx(
        0.5 + step
    )
