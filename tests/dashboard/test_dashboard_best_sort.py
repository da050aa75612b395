"""Sorting the experiment list by "best": values compared within one searcher metric only,
``smaller_is_better`` honoured, experiments without a value last (both directions)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from registry.models import Experiment
from tests.helpers import DASHBOARD_CONFIG

pytestmark = pytest.mark.django_db


def _experiment(owner, name: str, metric: str, smaller: bool | None, best: float | None):
    base: dict[str, Any] = DASHBOARD_CONFIG["searcher"]  # type: ignore[assignment]
    searcher = {**base, "metric": metric}
    if smaller is None:
        searcher.pop("smaller_is_better")  # Determined's default: smaller is better
    else:
        searcher["smaller_is_better"] = smaller
    config = {**DASHBOARD_CONFIG, "searcher": searcher}
    return Experiment.objects.create(
        owner=owner, name=name, model_definition=b"", config=config, best_validation=best
    )


def _names(client, sort: str) -> list[str]:
    html = client.get("/", {"sort": sort}).content.decode()
    ids = [int(i) for i in re.findall(r'data-experiment="(\d+)"', html)]
    by_id = dict(Experiment.objects.values_list("id", "name"))
    return [by_id[i] for i in ids]


def test_best_sort_compares_within_one_metric(client_alice, alice):
    _experiment(alice, "acc-0.9", "accuracy", False, 0.9)
    _experiment(alice, "acc-0.5", "accuracy", False, 0.5)
    _experiment(alice, "acc-none", "accuracy", False, None)
    _experiment(alice, "loss-0.2", "loss", True, 0.2)
    _experiment(alice, "loss-0.7", "loss", None, 0.7)  # smaller_is_better by default
    # Per metric (by name), best first; a 0.2 loss never lands among accuracies.
    assert _names(client_alice, "best") == [
        "acc-0.9",
        "acc-0.5",
        "loss-0.2",
        "loss-0.7",
        "acc-none",
    ]
    assert _names(client_alice, "-best") == [
        "acc-0.5",
        "acc-0.9",
        "loss-0.7",
        "loss-0.2",
        "acc-none",
    ]
