"""Finding runs by results: the filter language over 100,000 trials, per database backend.

Run from the repository root: ``.venv/bin/python bench/run_filter.py`` (``make bench``).

For SQLite (a fresh temp file) and PostgreSQL (``headway_bench_filter``, recreated; skipped with
a note when unreachable) this migrates a fresh database and bulk-inserts ``--trials`` (100,000)
trials in 100 experiments (``bulk_create``, so the side table's triggers run as for any other
writer), each with realistic hyperparameters (log-uniform ``lr``, ``batch_size``,
``optimizer``, ``dropout``, ``layers``, a boolean, a nested ``optim.momentum``) and summary
metrics (six series of two groups), states and labels.

Then, in the same process, each filter is timed ``--repeat`` times (p50 and p95) through the
list views' code path (``registry.search.filter_queryset`` on the trial list's queryset,
sorted, then the page's ``count()`` and its first 100 rows), and again through the baseline:
the same filter with hyperparameters and metrics read by Django's JSON key lookups on
``Trial.hparams`` / ``Trial.summary_metrics`` (``indexed=False``, what the side table
replaced; the only way on SQLite, where the two paths are the same). Each filter's two answers
are checked to count the same trials. One filter is also timed through ``GET
/api/v1/trials/?filter=`` (Django's test ``Client``: server time, no network).

It also times the write side on PostgreSQL: 5,000 ``summary_metrics`` updates (one series'
latest value, as a metric report writes it) with the trigger and with it disabled.

Prints a table of p50/p95 in ms and the baseline/indexed ratios, and ends with one JSON line.
Goal (docs/performance.md): every filter's p95 <= 200 ms over 100,000 trials on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _fixtures import STARTED_AT, searcher_config
from _server import REPO, Backend, backend_factories, percentile
from _tiny import pick

POSTGRES_URL = os.environ.get(
    "HEADWAY_BENCH_FILTER_POSTGRES_URL",
    "postgres://postgres@127.0.0.1:5432/headway_bench_filter",
)
GOAL_P95_MS = 200.0
EXPERIMENTS = 100
PAGE = 100

# name -> (filter, order_by): what a user types in the trial list's filter box.
FILTERS = {
    "metric_range": ("validation_accuracy > 0.95", None),
    "hparam_range": ("hparams.lr < 1e-4", None),
    "hparam_equal": ('hparams.optimizer = "sgd"', None),
    "combined": (
        'validation_accuracy > 0.9 and hparams.lr < 1e-3 or hparams.optimizer = "sgd" '
        "and state = COMPLETED",
        None,
    ),
    "not": ('not (hparams.optimizer = "adam") and validation_loss < 0.3', None),
    "label": ('labels contains "baseline"', None),
    "state": ("state in (ERROR, CANCELED)", None),
    "sorted": ("hparams.batch_size >= 128", "-validation_accuracy"),
}
REST_FILTER = "combined"


def _load(trials: int) -> float:
    """(child) Insert the experiments and trials; return seconds taken."""
    import numpy as np
    from django.contrib.auth import get_user_model

    from registry.models import Experiment, State, Trial

    owner = get_user_model().objects.get(username="bench")
    rng = np.random.default_rng(0)
    config = searcher_config(1000, metric="validation_accuracy")
    experiments = Experiment.objects.bulk_create(
        Experiment(
            owner=owner,
            name=f"search-{i}",
            config=config,
            model_definition=b"",
            labels=["baseline"] if i % 10 == 0 else [],
            state=State.COMPLETED,
        )
        for i in range(EXPERIMENTS)
    )
    states = [State.COMPLETED] * 7 + [State.ERROR, State.CANCELED, State.ACTIVE]
    t0 = time.perf_counter()
    batch = 5000
    for start in range(0, trials, batch):
        rows = []
        for i in range(start, min(trials, start + batch)):
            lr = float(10 ** rng.uniform(-5, -1))
            accuracy = float(
                min(0.999, max(0.0, 0.9 - 0.02 * abs(math.log10(lr) + 3) + rng.normal(0, 0.03)))
            )
            loss = float(-math.log(max(accuracy, 1e-3)) + rng.uniform(0, 0.1))

            def series(value: float) -> dict:
                return {"last": value, "last_step": 1000, "min": value, "max": value, "count": 10}

            rows.append(
                Trial(
                    experiment=experiments[i % EXPERIMENTS],
                    hparams={
                        "lr": lr,
                        "batch_size": int(rng.choice([16, 32, 64, 128, 256])),
                        "optimizer": str(rng.choice(["adam", "sgd", "adamw"])),
                        "dropout": float(rng.uniform(0, 0.5)),
                        "layers": int(rng.integers(1, 13)),
                        "use_bn": bool(rng.integers(0, 2)),
                        "optim": {"momentum": float(rng.uniform(0.8, 0.99))},
                    },
                    summary_metrics={
                        "validation": {
                            "validation_accuracy": series(accuracy),
                            "validation_loss": series(loss),
                            "validation_f1": series(accuracy * 0.98),
                        },
                        "training": {
                            "loss": series(loss * 0.9),
                            "lr": series(lr),
                            "grad_norm": series(float(rng.uniform(0, 5))),
                        },
                    },
                    best_validation=accuracy,
                    state=states[i % len(states)],
                    steps_completed=1000,
                    labels={"baseline": ""} if i % 50 == 0 else {},
                    created_at=STARTED_AT,
                )
            )
        Trial.objects.bulk_create(rows)
    return time.perf_counter() - t0


def _page(queryset) -> tuple[int, list[int]]:
    """What the list view asks of a queryset (``search_params.trial_page``): the count, the
    first page's ids, then those rows."""
    from registry.search.paging import rows_in_order, sorted_ids

    sequence = sorted_ids(queryset)
    count = sequence.count()
    ids = list(sequence[:PAGE])
    rows = rows_in_order(queryset, ids)
    assert len(rows) == len(ids)
    return count, ids


def _timed(run, repeat: int) -> tuple[float, float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), percentile(times, 95), result


def _trial_list():
    """The global trial list's queryset (registry/api/views/trials.py)."""
    from registry.models import State, Trial

    return (
        Trial.objects.with_run_state()
        .select_related("experiment")
        .exclude(experiment__state__in=(State.DELETING, State.DELETED))
    )


def _writes(count: int) -> dict[str, float]:
    """(child, PostgreSQL) Milliseconds per 1,000 summary updates as a report batch writes
    them (the summary with one series moved on), for a training series (the metric store's hot
    path) and a validation one, with the side table's triggers and with them disabled."""
    from django.db import connection, transaction

    from registry.models import Trial

    ids = list(Trial.objects.order_by("id").values_list("id", flat=True)[:count])
    out = {}
    for group, name in (("training", "loss"), ("validation", "validation_loss")):
        for label, enabled in (("trigger", True), ("no_trigger", False)):
            with transaction.atomic(), connection.cursor() as cursor:
                if not enabled:
                    cursor.execute("ALTER TABLE registry_trial DISABLE TRIGGER USER")
                t0 = time.perf_counter()
                for n, trial_id in enumerate(ids):
                    cursor.execute(
                        "UPDATE registry_trial SET summary_metrics = jsonb_set(summary_metrics,"
                        " %s, to_jsonb(%s::float8)) WHERE id = %s",
                        [
                            f"{{{group},{name},last}}",
                            0.5 + n * 1e-6 + (0 if enabled else 1),
                            trial_id,
                        ],
                    )
                elapsed = (time.perf_counter() - t0) * 1000 / count * 1000
                out[f"update_{group}_{label}_ms_per_1000"] = elapsed
                if not enabled:
                    cursor.execute("ALTER TABLE registry_trial ENABLE TRIGGER USER")
        out[f"update_{group}_trigger_ratio"] = (
            out[f"update_{group}_trigger_ms_per_1000"]
            / out[f"update_{group}_no_trigger_ms_per_1000"]
        )
    return out


def _child(token: str, trials: int, repeat: int, out_path: str) -> None:
    """(child) Load, measure, write the figures as JSON to ``out_path``."""
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    from registry.models import TrialSearchValue
    from registry.search import Target, filter_queryset, order_queryset
    from registry.search.compile import to_q, use_side_table
    from registry.search.grammar import parse

    load_s = _load(trials)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE registry_trial")
            cursor.execute("VACUUM ANALYZE registry_trialsearchvalue")
    figures: dict[str, float] = {
        "trials": trials,
        "load_s": load_s,
        "side_rows_per_trial": TrialSearchValue.objects.count() / trials,
    }
    for name, (text, order_by) in FILTERS.items():

        def indexed(text=text, order_by=order_by):
            queryset = filter_queryset(_trial_list(), text, Target.TRIAL)
            return _page(order_queryset(queryset.order_by("id"), order_by))

        def baseline(text=text, order_by=order_by):
            queryset = _trial_list().filter(to_q(parse(text), Target.TRIAL, indexed=False))
            return _page(order_queryset(queryset.order_by("id"), order_by))

        indexed()  # warm: plans and caches, as a running server has them
        p50, p95, (count, _) = _timed(indexed, repeat)
        b50, _, (b_count, _) = _timed(baseline, max(1, repeat // 2))
        assert count == b_count, (name, count, b_count)
        figures.update(
            {
                f"{name}_matches": count,
                f"{name}_p50_ms": p50,
                f"{name}_p95_ms": p95,
                f"{name}_baseline_p50_ms": b50,
                f"{name}_speedup": b50 / p50,
            }
        )
    exp_text = "validation_accuracy > 0.99 and hparams.optimizer = adamw"
    from registry.models import Experiment

    def experiments():
        return _page(filter_queryset(Experiment.objects.all(), exp_text, Target.EXPERIMENT))

    experiments()
    figures["experiments_p50_ms"], figures["experiments_p95_ms"], _ = _timed(experiments, repeat)
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    rest_text = FILTERS[REST_FILTER][0]

    def rest():
        response = client.get("/api/v1/trials/", {"filter": rest_text, "limit": PAGE})
        assert response.status_code == 200, response.content[:300]
        return response.json()["count"]

    rest()
    figures["rest_p50_ms"], figures["rest_p95_ms"], _ = _timed(rest, max(1, repeat // 2))
    if use_side_table():
        figures.update(_writes(pick(5000, 50)))
    Path(out_path).write_text(json.dumps(figures))


def measure(backend: Backend, trials: int, repeat: int) -> dict[str, float]:
    token = backend.prepare()
    out = backend.var_dir / "figures.json"
    cmd = [sys.executable, __file__, "--child", token, "--trials", str(trials)]
    cmd += ["--repeat", str(repeat), "--out", str(out)]
    subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=pick(100_000, 500))
    parser.add_argument("--repeat", type=int, default=pick(20, 2))
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="measure PostgreSQL only")
    parser.add_argument("--child", metavar="TOKEN", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.trials, args.repeat, args.out)
    backends = backend_factories(POSTGRES_URL, postgres=not args.no_postgres)
    if args.no_sqlite:
        backends = backends[1:]
    figures: dict[str, float] = {}
    for make in backends:
        backend = make()
        try:
            print(f"loading {args.trials} trials and measuring {backend.label} ...", flush=True)
            r = measure(backend, args.trials, args.repeat)
        finally:
            backend.cleanup()
        print(
            f"\n{backend.label}: {r['trials']} trials, loaded in {r['load_s']:.1f} s "
            f"({r['side_rows_per_trial']:.1f} side rows per trial)"
        )
        print(f"{'filter':<14}{'matches':>9}{'p50 ms':>9}{'p95 ms':>9}{'json p50':>10}{'ratio':>8}")
        for name in FILTERS:
            print(
                f"{name:<14}{r[f'{name}_matches']:>9}{r[f'{name}_p50_ms']:>9.1f}"
                f"{r[f'{name}_p95_ms']:>9.1f}{r[f'{name}_baseline_p50_ms']:>10.1f}"
                f"{r[f'{name}_speedup']:>8.1f}"
            )
        print(
            f"experiments p50 {r['experiments_p50_ms']:.1f} ms; REST ({REST_FILTER}) p50 "
            f"{r['rest_p50_ms']:.1f} ms p95 {r['rest_p95_ms']:.1f} ms"
        )
        for group in ("training", "validation"):
            if f"update_{group}_trigger_ratio" in r:
                print(
                    f"{group} summary updates per 1,000: "
                    f"{r[f'update_{group}_trigger_ms_per_1000']:.0f} ms with the triggers, "
                    f"{r[f'update_{group}_no_trigger_ms_per_1000']:.0f} ms without "
                    f"(x{r[f'update_{group}_trigger_ratio']:.2f})"
                )
        worst = max(r[f"{name}_p95_ms"] for name in FILTERS)
        r["worst_p95_ms"] = worst
        if backend.label == "postgres":
            r["goal_met"] = worst <= GOAL_P95_MS
        figures.update({f"{backend.label}_{k}": round(v, 3) for k, v in r.items()})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
