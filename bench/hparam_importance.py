"""Hyperparameter importance (``GET experiments/{id}/hparam-importance/``) at 100 and 1,000 trials.

Run from the repository root: ``.venv/bin/python bench/hparam_importance.py``.

On a fresh SQLite database (``HEADWAY_BENCH_BACKENDS`` / ``DATABASE_URL`` as for the other
benchmarks, ``bench/_server.py``) this builds, for each size in ``--trials`` (100, 1000), a finished
search whose trials have 4 hyperparameters (two numeric, one nested, one categorical) plus
``--hparams`` more (numeric noise; default 96, so 100 in all) and two validation reports each
(through ``registry.metrics.metrics_report``, which keeps ``best_validation``). In the same process
(Django's test ``Client``: server time, no network), each the median of ``--repeat``:

- ``queue``: the importance request that finds no stored fit and queues one (a 202);
- ``fit``: the fit itself, the master worker's task (``headway.hparam_importance``) run here, which
  no request waits for;
- ``cached``: the request once the fit is stored (a 200 with the stored answer);
- ``baseline``: ``GET experiments/{id}/trials/`` (its first 100 trials), the plainest read of the
  same experiment's trials.

Prints the ratios queue / baseline, fit / baseline and cached / baseline, and ends with one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fixtures import timed_get
from _server import REPO, Backend, backend_factories
from _tiny import pick

POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/headway_bench_hparams"


def _search(trials: int, extra: int) -> int:
    """(child) A finished search of ``trials`` trials with ``extra`` noise hyperparameters;
    returns its id."""
    from django.contrib.auth import get_user_model

    from registry.metrics import metrics_report, parse_reports
    from registry.models import Experiment, State, Trial

    owner = get_user_model().objects.get(username="bench")
    config = {
        "searcher": {
            "name": "random",
            "metric": "validation_accuracy",
            "max_trials": trials,
            "smaller_is_better": False,
            "max_length": {"batches": 100},
        },
        "entrypoint": "model_def:T",
        "hyperparameters": {},
        "reproducibility": {"experiment_seed": 7},
    }
    experiment = Experiment.objects.create(
        owner=owner,
        name=f"bench-{trials}",
        config=config,
        state=State.COMPLETED,
        model_definition=b"",
    )
    rng = random.Random(trials)
    for i in range(trials):
        lr = 10 ** rng.uniform(-4, -1)
        hparams = {
            "lr": lr,
            "dropout": rng.uniform(0.1, 0.5),
            "optimizer": ("adam", "sgd", "rmsprop")[i % 3],
            "layers": {"width": rng.choice((32, 64, 128))},
            **{f"noise{j:03d}": rng.random() for j in range(extra)},
        }
        value = 0.9 - 0.1 * abs(math.log10(lr) + 2.5) + rng.gauss(0, 0.01)
        trial = Trial.objects.create(experiment=experiment, hparams=hparams, state=State.COMPLETED)
        reports = [
            {
                "group": "validation",
                "steps_completed": s,
                "metrics": {"validation_accuracy": value * s / 100},
            }
            for s in (50, 100)
        ]
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
    return experiment.id


def _child(token: str, sizes: list[int], extra: int, repeat: int, out_path: str) -> None:
    """(child) Build, measure, write the figures as JSON to ``out_path``."""
    import statistics
    import time

    import django

    django.setup()
    from django.test import Client

    from registry.models import HparamImportanceFit
    from registry.tasks import hparam_importance

    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    figures: dict[str, float] = {}
    for trials in sizes:
        experiment_id = _search(trials, extra)
        path = f"/api/v1/experiments/{experiment_id}/hparam-importance/"
        queues, fits = [], []
        for i in range(repeat + 1):  # the first round imports scikit-learn: not timed
            HparamImportanceFit.objects.all().delete()
            t0 = time.perf_counter()
            response = client.get(path)
            queued = (time.perf_counter() - t0) * 1000
            assert response.status_code == 202, (response.status_code, response.content[:300])
            t0 = time.perf_counter()
            hparam_importance(HparamImportanceFit.objects.get().id)
            fitted = (time.perf_counter() - t0) * 1000
            if i:
                queues.append(queued)
                fits.append(fitted)
        cached_ms, response = timed_get(client, path, repeat)
        assert response.json()["trials"] == trials
        baseline_ms, _ = timed_get(client, f"/api/v1/experiments/{experiment_id}/trials/", repeat)
        figures.update(
            {
                f"queue_{trials}_ms": statistics.median(queues),
                f"fit_{trials}_ms": statistics.median(fits),
                f"cached_{trials}_ms": cached_ms,
                f"baseline_{trials}_ms": baseline_ms,
            }
        )
    Path(out_path).write_text(json.dumps(figures))


def measure(backend: Backend, sizes: list[int], extra: int, repeat: int) -> dict[str, float]:
    token = backend.prepare()
    out = backend.var_dir / "figures.json"
    cmd = [sys.executable, __file__, "--child", token, "--repeat", str(repeat), "--out", str(out)]
    cmd += ["--hparams", str(extra), "--trials", *map(str, sizes)]
    subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[pick(100, 10), pick(1000, 20)])
    parser.add_argument(
        "--hparams", type=int, default=pick(96, 6), help="noise hyperparameters beyond the 4"
    )
    parser.add_argument("--repeat", type=int, default=pick(5, 1))
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--child", metavar="TOKEN", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.trials, args.hparams, args.repeat, args.out)
    figures: dict[str, float] = {}
    print(
        f"{'backend':9s} {'trials':>6s} {'queue ms':>8s} {'fit ms':>8s} {'cached ms':>9s}"
        f" {'baseline ms':>11s} {'queue/base':>10s} {'fit/base':>8s} {'cached/base':>11s}"
    )
    for make in backend_factories(POSTGRES_URL, postgres=not args.no_postgres):
        backend = make()
        try:
            r = measure(backend, args.trials, args.hparams, args.repeat)
        finally:
            backend.cleanup()
        for trials in args.trials:
            queue, fit, cached, base = (
                r[f"{k}_{trials}_ms"] for k in ("queue", "fit", "cached", "baseline")
            )
            print(
                f"{backend.label:9s} {trials:6d} {queue:8.1f} {fit:8.1f} {cached:9.1f} {base:11.1f}"
                f" {queue / base:9.2f}x {fit / base:7.1f}x {cached / base:10.2f}x"
            )
            figures.update({f"{backend.label}_{k}": round(v, 2) for k, v in r.items()})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
