"""The cluster operations of ``bench/scheduling_scale.py``: hosts joining and beating, runs
queued, placement passes, and its phase 1 (the backfill scenario).

They run the registry's own code in the bench's process, which ``setup_django`` bound to the
bench's database; ``STARTED`` (the hosts' start time) is set by the bench before the first
host registers.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

SLOTS = 8
TRIALS_PER_EXPERIMENT = 100
STARTED: Any = None


def host_pool() -> str:
    """The pool value a host registers with: the resource pool ``default`` (HEADWAY_QUEUE
    before resource pools, as in the baseline commit)."""
    from django.conf import settings

    from registry.models import WorkerHost

    fields = {f.name for f in WorkerHost._meta.get_fields()}
    return "default" if "namespace" in fields else settings.CELERY_TASK_DEFAULT_QUEUE


def heartbeat(name: str) -> None:
    """One host heartbeat as the master handles one that adds capacity (``host_agent.host_beat``,
    no lease listed; the baseline commit's worker made the same calls for every beat): the upsert,
    then a pass request (one that never waits for a running pass where the code has it)."""
    from registry import scheduling

    register(name)
    if "wait" in inspect.signature(scheduling.place_queued_runs).parameters:
        scheduling.place_queued_runs(wait=False)
    else:
        scheduling.place_queued_runs()


def register(name: str) -> None:
    """The upsert of a heartbeat (``host_heartbeat``) alone: hosts join without a pass, so the
    passes that fill them are the ones measured."""
    from django.conf import settings

    from registry import scheduling

    scheduling.host_heartbeat(
        name=name,
        pool=host_pool(),
        queue=f"{settings.CELERY_TASK_DEFAULT_QUEUE}.host.{name}",
        slots=SLOTS,
        devices=[str(i) for i in range(SLOTS)],
        gpu=True,
        started_at=STARTED,
    )


def queue_runs(owner: Any, count_one: int, count_eight: int, name: str) -> None:
    """Queue ``count_one`` 1-slot and ``count_eight`` 8-slot runs (every 11th) through
    ``queue_run`` (``schedule_run`` without the on-commit pass each would request), in
    experiments of ``TRIALS_PER_EXPERIMENT`` trials (the first of each size named
    ``<name>-<slots>``)."""
    from django.db import transaction

    from registry.models import Experiment, Trial

    try:
        from registry.scheduling import queue_run
    except ImportError:  # a baseline commit before queue_run: its pass request comes along
        from registry.scheduling import schedule_run as queue_run

    made: dict[int, list[Any]] = {1: [], SLOTS: []}  # slots -> experiments, the last filling
    counts: dict[int, int] = {1: 0, SLOTS: 0}

    def experiment(slots: int) -> Any:
        if counts[slots] % TRIALS_PER_EXPERIMENT == 0:
            config = {
                "entrypoint": "python train.py",
                "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                "resources": {"slots_per_trial": slots},
                # As experiment_create completes it: a stored config validates (exits read it).
                "reproducibility": {"experiment_seed": 1},
            }
            suffix = f"-{len(made[slots])}" if made[slots] else ""
            made[slots].append(
                Experiment.objects.create(
                    owner=owner, name=f"{name}-{slots}{suffix}", config=config, model_definition=b""
                )
            )
        counts[slots] += 1
        return made[slots][-1]

    total = count_one + count_eight
    # The 8-slot runs spread evenly through the queue (every 11th of 10,000 + 1,000).
    kinds = [
        experiment(SLOTS if (i + 1) * count_eight // total > i * count_eight // total else 1)
        for i in range(total)
    ]
    trials = Trial.objects.bulk_create([Trial(experiment=e) for e in kinds], batch_size=1000)
    # The queue first; passes are measured later.
    for start in range(0, len(trials), 500):
        with transaction.atomic():
            for trial in trials[start : start + 500]:
                queue_run(trial)


def place() -> tuple[int, float]:
    """One blocking pass: (runs placed, seconds)."""
    from registry import scheduling

    began = time.perf_counter()
    placed = scheduling.place_queued_runs()
    return len(placed), time.perf_counter() - began


def backfill_scenario() -> dict[str, Any]:
    """Phase 1 in a namespace of its own: does a wide head block the 1-slot runs behind it?"""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from registry.models import RunState, TrialRun

    User = get_user_model()
    main = settings.CELERY_TASK_DEFAULT_QUEUE
    settings.CELERY_TASK_DEFAULT_QUEUE = f"{main}-mixed"
    try:
        owner = User.objects.create_user("bench-mixed")
        hosts = [f"mixed-{i}" for i in range(1, 5)]
        for name in hosts:
            register(name)
        queue_runs(owner, 4 * SLOTS, 0, "fill")
        place()
        queue_runs(owner, 0, 1, "head")  # the 8-slot head...
        queue_runs(owner, 40, 0, "behind")  # ...then 40 1-slot runs
        placed_runs = TrialRun.objects.filter(host__name__in=hosts).exclude(state=RunState.EXITED)
        for name in hosts:  # 2 slots free on every host
            ids = list(placed_runs.filter(host__name=name).values_list("id", flat=True)[:2])
            TrialRun.objects.filter(id__in=ids).update(state=RunState.EXITED)
        head = TrialRun.objects.get(trial__experiment__name=f"head-{SLOTS}")
        placed, _ = place()
        head.refresh_from_db()  # still waiting: it fits no host now
        free = {
            name: SLOTS - sum(placed_runs.filter(host__name=name).values_list("slots", flat=True))
            for name in hosts
        }
        kept = max(free.values())
        reserved = next(name for name, count in free.items() if count == kept)
        # The reserved host's other runs end: the head starts in the next pass.
        placed_runs.filter(host__name=reserved).update(state=RunState.EXITED)
        after, _ = place()
        return {
            "hosts": len(hosts),
            "backfilled_while_head_waits": placed,
            "head_waited": head.host_id is None,
            "idle_slots_while_head_waits": sum(free.values()),
            "free_slots_kept_for_head": kept,
            "head_started_when_its_host_drained": bool(after)
            and TrialRun.objects.filter(id=head.id, host__name=reserved).exists(),
        }
    finally:
        settings.CELERY_TASK_DEFAULT_QUEUE = main
