"""A small world of experiments and trials to search: rows written through the ORM, so the
side table is filled by its database triggers exactly as in production."""

import datetime as dt
from types import SimpleNamespace

import pytest

from registry.models import Experiment, State, Trial
from tests.helpers import create_experiment


def summary(**last):
    """``summary_metrics`` with these latest values: ``validation__accuracy=0.9``."""
    out: dict = {}
    for key, value in last.items():
        group, name = key.split("__")
        out.setdefault(group, {})[name] = {
            "last": value,
            "last_step": 100,
            "min": value,
            "max": value,
            "count": 1,
        }
    return out


def day(text):
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.fixture
def world(api, user, django_user_model):
    """Experiments ``vision`` (alice's: trials ``t1`` ``t2``) and ``nlp`` (bob's: ``t3`` ``t4``);
    ``names(queryset)`` answers the names of the trials (or experiments) it holds."""
    config = Experiment.objects.get(id=create_experiment(api).json()["id"]).config
    Experiment.objects.all().delete()
    bob = django_user_model.objects.create_user("bob", password="bob-password")
    vision = Experiment.objects.create(
        owner=user,
        name="resnet baseline",
        description="ImageNet, the classic",
        labels=["baseline", "vision"],
        config=config,
        model_definition=b"",
        state=State.COMPLETED,
        created_at=day("2026-10-15T08:00:00"),
        ended_at=day("2026-10-16T09:00:00"),
        best_validation=0.97,
    )
    nlp = Experiment.objects.create(
        owner=bob,
        name="bert",
        labels=["nlp"],
        config=config,
        model_definition=b"",
        state=State.ACTIVE,
        created_at=day("2026-11-02T10:00:00"),
        archived=True,
    )
    trials = {
        "t1": Trial.objects.create(
            experiment=vision,
            hparams={
                "lr": 0.0005,
                "optimizer": "adam",
                "layers": 4,
                "bn": True,
                "optim": {"momentum": 0.9},
            },
            summary_metrics=summary(validation__accuracy=0.97, training__loss=0.1),
            state=State.COMPLETED,
            steps_completed=1000,
            best_validation=0.97,
            labels={"team": "vision", "baseline": ""},
            created_at=day("2026-10-15T08:00:00"),
            ended_at=day("2026-10-16T09:00:00"),
        ),
        "t2": Trial.objects.create(
            experiment=vision,
            hparams={"lr": 0.01, "optimizer": "sgd", "layers": 2, "bn": False},
            summary_metrics=summary(validation__accuracy=0.90, training__loss=0.5),
            state=State.ERROR,
            steps_completed=200,
            best_validation=0.90,
            labels={"team": "vision-2"},
            created_at=day("2026-10-15T23:59:59"),
            ended_at=day("2026-10-16T01:00:00"),
        ),
        "t3": Trial.objects.create(
            experiment=nlp,
            hparams={"lr": 0.0001, "optimizer": "adam"},
            summary_metrics=summary(validation__accuracy=0.96),
            state=State.ACTIVE,
            steps_completed=50,
            best_validation=0.96,
            created_at=day("2026-11-02T10:00:00"),
        ),
        "t4": Trial.objects.create(
            experiment=nlp,
            hparams={"lr": "auto"},
            summary_metrics=summary(training__loss="NaN"),
            state=State.CANCELED,
            created_at=day("2026-11-03T00:00:00"),
            ended_at=day("2026-11-03T01:00:00"),
        ),
    }
    by_id = {trial.id: name for name, trial in trials.items()}
    experiments = {vision.id: "vision", nlp.id: "nlp"}

    def names(queryset):
        model_names = by_id if queryset.model is Trial else experiments
        return sorted(model_names[row.id] for row in queryset)

    return SimpleNamespace(
        trials=trials, vision=vision, nlp=nlp, alice=user, bob=bob, names=names, by_id=by_id
    )
