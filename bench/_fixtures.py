"""Data and timing shared by the in-process read benchmarks (``metrics_read``, ``dashboard``).

Run inside a benchmark's child process after ``django.setup()`` (the imports of Django and the
registry happen in the functions, so importing this module stays cheap for the parent).

- ``load_metric_experiment``: the metric-store issue's experiment, bulk-loaded with
  ``registry.metrics._bulk.bulk_load`` (not through REST): ``trials`` trials x ``METRICS`` x
  ``steps`` steps, one report per step holding the three metrics.
- ``fill_experiment_list``: thousands of cheap experiments (``bulk_create``) for list pages.
- ``timed_get``: the median server time of a GET through Django's test ``Client`` (view,
  queries, rendering; no network).
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from typing import Any

METRICS = ("m0", "m1", "m2")
STARTED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def searcher_config(steps: int, metric: str = "m0", searcher: str = "random") -> dict[str, Any]:
    """The stored config of a bench experiment: a ``searcher`` search on ``metric`` over
    ``steps``, validated and completed as submission stores it (``Experiment.conf`` reads it)."""
    from headway.expconf import parse_experiment_config

    search: dict[str, Any] = {"name": searcher, "metric": metric, "max_length": {"batches": steps}}
    if searcher == "random":
        search["max_trials"] = 1
    return parse_experiment_config({"entrypoint": "model_def:Trial", "searcher": search}).to_dict()


def load_metric_experiment(
    owner: Any, *, name: str, trials: int, steps: int, rng: Any, metrics: tuple[str, ...] = METRICS
) -> tuple[Any, list[int], int]:
    """Create an experiment of ``trials`` trials and bulk-load ``METRICS`` x ``steps`` into each.

    Trial ``i`` has ``hparams={"lr": 10 ** -(1 + i % 4)}`` and metric ``k`` follows
    ``exp(-step / (steps / (2 + i % 5))) * (1 + k)`` plus N(0, 0.05) noise, in group
    ``training``, steps 1..``steps``, ``reported_at`` from ``STARTED_AT`` 10 ms apart. Prints
    progress every 10 trials.

    Arguments:
        owner: the ``User`` owning the experiment.
        rng: a ``numpy.random.Generator`` (seeded by the caller, so runs are comparable).
        metrics: the metric names (``METRICS`` unless given; ``bench/dashboard.py`` charts 5).

    Returns:
        (experiment, trial ids in creation order, points stored).
    """
    import numpy as np

    from registry.metrics._bulk import bulk_load
    from registry.models import Experiment, Trial

    experiment = Experiment.objects.create(
        owner=owner, name=name, config=searcher_config(steps), model_definition=b""
    )
    points = 0
    trial_ids = []
    step_array = np.arange(1, steps + 1, dtype=np.int64)
    t0 = time.perf_counter()
    for i in range(trials):
        trial = Trial.objects.create(experiment=experiment, hparams={"lr": 10 ** -(1 + i % 4)})
        trial_ids.append(trial.id)
        decay = np.exp(-step_array / (steps / (2 + i % 5)))
        series = {
            metric: decay * (1 + k) + 0.05 * rng.standard_normal(steps)
            for k, metric in enumerate(metrics)
        }
        points += bulk_load(trial.id, "training", step_array, series, started_at=STARTED_AT)
        if (i + 1) % 10 == 0:
            print(
                f"  loaded {i + 1}/{trials} trials ({time.perf_counter() - t0:.0f} s)", flush=True
            )
    return experiment, trial_ids, points


def timed_get(client: Any, path: str, repeat: int) -> tuple[float, Any]:
    """Median milliseconds of ``repeat`` GETs of ``path`` and the last response.

    Raises:
        AssertionError: when a response is not 200 (with the start of its body).
    """
    times = []
    response = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(path)
        _ = response.content
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
    return statistics.median(times), response


LABELS = ("baseline", "mnist", "cifar10", "resnet", "sweep", "prod", "ablation", "lr-search")
SEARCHERS = (("single", "validation_loss"), ("random", "validation_loss"), ("grid", "accuracy"))
# (state, weight): mostly finished experiments, as on a long-lived cluster.
STATE_MIX = (
    ("COMPLETED", 55),
    ("CANCELED", 10),
    ("ERROR", 8),
    ("ACTIVE", 15),
    ("PAUSED", 10),
    ("STOPPING_CANCELED", 2),
)


def fill_experiment_list(count: int, *, users: int = 20, seed: int = 1) -> int:
    """Bulk-create ``count`` cheap experiments (``bulk_create``), a few of them with trials.

    Owners are ``users`` users ``user00``.. (created here); each experiment gets 0-3 of
    ``LABELS``, a state from ``STATE_MIX`` (terminal ones with ``ended_at``, 1 in 10 of those
    archived), a searcher from ``SEARCHERS``, a creation time over the past year, progress and a
    best value; every 40th one gets 1-8 trials. No metrics, checkpoints or model definition.

    Returns:
        The number of trials created.
    """
    import random
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from registry.models import Experiment, Trial
    from registry.models.states import TERMINAL_STATES

    rnd = random.Random(seed)
    user_model = get_user_model()
    user_model.objects.bulk_create([user_model(username=f"user{i:02d}") for i in range(users)])
    owners = list(user_model.objects.filter(username__startswith="user"))
    states = [state for state, _ in STATE_MIX]
    weights = [weight for _, weight in STATE_MIX]
    now = timezone.now()
    rows = []
    for i in range(count):
        state = rnd.choices(states, weights)[0]
        searcher, metric = rnd.choice(SEARCHERS)
        created = now - timedelta(minutes=rnd.randrange(365 * 24 * 60))
        terminal = state in TERMINAL_STATES
        config = searcher_config(1000, metric, searcher)
        rows.append(
            Experiment(
                owner=rnd.choice(owners),
                name=f"{rnd.choice(LABELS)}-{searcher}-{i}",
                labels=rnd.sample(LABELS, rnd.randrange(4)),
                config=config,
                model_definition=b"",
                state=state,
                archived=terminal and rnd.random() < 0.1,
                progress=1.0 if state == "COMPLETED" else round(rnd.random(), 3),
                best_validation=None if state == "ACTIVE" else rnd.random(),
                created_at=created,
                ended_at=created + timedelta(minutes=rnd.randrange(1, 600)) if terminal else None,
            )
        )
    # PostgreSQL and SQLite >= 3.35 set the new ids on the instances.
    created_rows = Experiment.objects.bulk_create(rows, batch_size=500)
    trials = [
        Trial(experiment_id=exp.pk, state=exp.state, hparams={"lr": rnd.random()})
        for exp in created_rows[::40]
        for _ in range(rnd.randrange(1, 9))
    ]
    Trial.objects.bulk_create(trials, batch_size=500)
    return len(trials)
