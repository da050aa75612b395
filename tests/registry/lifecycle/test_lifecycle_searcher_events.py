"""Searcher events in the registry: a searcher gets every event it declares and no other. A
``random`` search that also asks for validation reports (no ``time_metric``) hears each one as
it is ingested, in step order, and may stop a trial with it; one that leaves ``progress`` out
gets the trials' mean progress instead of its own."""

from __future__ import annotations

from typing import Any

import pytest

from registry import lifecycle
from registry.metrics import metrics_report
from registry.models import Trial, TrialLog
from registry.searcher import SEARCHERS, Event, Operation, Stop
from registry.searcher._random import RandomSearch
from tests.helpers import TINY_MODEL, current_run, reload
from tests.helpers import start_run as start

pytestmark = pytest.mark.django_db


class ListeningRandom(RandomSearch):
    """``random`` that also asks for validation reports: it records each one in its state and
    stops a trial whose metric drops below 0.1."""

    events = RandomSearch.events | {Event.VALIDATION_REPORTED}

    def __init__(self, config: Any, seed: int) -> None:
        super().__init__(config, seed)
        self.heard: list[list[Any]] = []

    def on_validation_reported(
        self, request_id: str, metric: float, time: float
    ) -> list[Operation]:
        self.heard.append([request_id, metric, time])
        return [Stop(request_id)] if metric < 0.1 else []

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "heard": self.heard}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.heard = list(state.get("heard", []))


class RandomWithoutProgress(RandomSearch):
    """``random`` that leaves ``Event.PROGRESS`` out (its ``progress()`` is never asked)."""

    events = RandomSearch.events - {Event.PROGRESS}


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("events-owner")


def create(owner, **searcher: object):
    config = {
        "entrypoint": ["python", "train.py"],
        "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
        "searcher": {"name": "random", "metric": "loss", "max_length": 8, **searcher},
        "reproducibility": {"experiment_seed": 5},
    }
    return lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    )


def validations(trial: Trial, *reports: tuple[int, dict[str, object]]) -> None:
    metrics_report(
        trial_id=trial.id,
        reports=[
            {"group": "validation", "steps_completed": steps, "metrics": metrics}
            for steps, metrics in reports
        ],
    )


def test_a_searcher_without_time_metric_hears_every_validation_it_asks_for(owner, monkeypatch):
    monkeypatch.setitem(SEARCHERS, "random", ListeningRandom)
    experiment = create(owner, max_trials=1)
    (trial,) = experiment.trials.all()
    assert trial.searcher_length == 8  # its operations go on as random's
    start(trial)
    # Out of step order in one batch: delivered in step order. A report without the searcher
    # metric is not delivered and the trial's log says so; another group is not a validation.
    validations(trial, (4, {"loss": 0.5}), (2, {"loss": 0.7}), (3, {"accuracy": 0.1}))
    metrics_report(
        trial_id=trial.id,
        reports=[{"group": "training", "steps_completed": 5, "metrics": {"loss": 0.01}}],
    )
    experiment.refresh_from_db()
    assert experiment.searcher_state["heard"] == [["1", 0.7, 2.0], ["1", 0.5, 4.0]]
    (line,) = TrialLog.objects.filter(trial=trial).values_list("message", flat=True)
    assert "validation at step 3 has no number 'loss'" in line
    assert "random ranks a trial only by validations reporting 'loss'" in line
    assert not reload(trial).searcher_closed
    # The searcher's answer is carried out: Stop closes the trial and asks its run to stop.
    validations(trial, (6, {"loss": 0.05}))
    assert reload(trial).searcher_closed
    assert current_run(trial).stop_requested == "close"
    assert TrialLog.objects.filter(
        trial=trial, message__contains="random stops this trial at step 6 (loss=0.05)"
    ).exists()
    experiment.refresh_from_db()
    assert experiment.searcher_state["heard"][-1] == ["1", 0.05, 6.0]


def test_a_searcher_that_does_not_ask_for_validations_hears_none(owner):
    experiment = create(owner, max_trials=1)
    (trial,) = experiment.trials.all()
    start(trial)
    validations(trial, (2, {"loss": 0.05}), (3, {"accuracy": 0.1}))
    experiment.refresh_from_db()
    assert "heard" not in experiment.searcher_state
    assert not reload(trial).searcher_closed
    assert not TrialLog.objects.filter(trial=trial).exists()


def end_the_first_trial(experiment) -> None:
    first = experiment.trials.order_by("id").first()
    start(first)
    lifecycle.trial_searcher_completed(trial_id=first.id, length=8, metric=0.5)
    lifecycle.trial_run_exited(trial_id=first.id, run_id=reload(first).run_id, exit_code=0)
    experiment.refresh_from_db()


def test_progress_is_the_trials_mean_when_the_searcher_does_not_ask_for_it(owner, monkeypatch):
    searcher = {"max_trials": 4, "max_concurrent_trials": 2}
    asked = create(owner, **searcher)
    end_the_first_trial(asked)
    assert asked.progress == pytest.approx(0.25)  # random's own: 1 of 4 trials ended
    monkeypatch.setitem(SEARCHERS, "random", RandomWithoutProgress)
    unasked = create(owner, **searcher)
    end_the_first_trial(unasked)
    # Without it: the mean of the trials' progress (1 ended, 2 not started).
    rows = list(unasked.trials.values_list("progress", flat=True))
    assert len(rows) == 3 and unasked.progress == pytest.approx(sum(rows) / 3)
    assert unasked.progress != pytest.approx(0.25)
