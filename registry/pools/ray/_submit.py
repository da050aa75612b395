"""Submitting the queued runs of ``ray`` pools as Ray jobs.

Headway's scheduler never places these runs: each queued run becomes one Ray job at once and
Ray places it (its placement group waits until the cluster has room). Per run, in one
transaction:

1. A ``RayJob`` row, one ``WorkerHost`` per slot (``ray-r<run pk>-b<i>``: one per bundle of
   the placement group, never alive until its node process heartbeats) and a host token for
   each; the run is placed on host 0 and ``RunShare`` rows on the others, exactly as a
   placement over agents, so the node processes use the host API unchanged.
2. The Jobs API's ``submit_job`` under the run's submission id (``_client.submission_id``),
   the entry point ``<python> -m workers.ray_node`` and the pool's runtime environment with
   Headway's variables added (``job_spec``).

A refused submission rolls all of it back and the trial says Ray's message; the next poll
tries again. A job of the run's id that exists already (an earlier try whose transaction did
not commit holds other host keys) is stopped and, once ended, deleted, before the run is
submitted again.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from registry.models import HostToken, RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.pools import ResourcePool
from registry.pools.queue import queued_runs
from registry.pools.ray import _client
from registry.pools.ray.models import RayJob
from registry.pools.ray.settings import RayPoolSettings, ray_settings

logger = logging.getLogger("headway.ray")


def bundle_host_name(run_pk: int, bundle: int) -> str:
    """The host a bundle of a run's placement group is to the master: ``ray-r<pk>-b<i>``."""
    return f"ray-r{run_pk}-b{bundle}"


def say(run_pk: int, message: str) -> None:
    """Show ``message`` as the scheduling message of run ``run_pk``'s trial (no write when it
    says that already: the reconciliation repeats it every poll)."""
    message = message[:500]
    Trial.objects.filter(runs__id=run_pk).exclude(scheduling_message=message).update(
        scheduling_message=message
    )


@dataclass(frozen=True)
class JobSpec:
    """What a run's Ray job is submitted as.

    Attributes:
        submission_id (str): the job's id (``_client.submission_id``).
        entrypoint (str): the driver's command line (``<python> -m workers.ray_node``).
        runtime_env (dict): the pool's runtime environment, ``env_vars`` with Headway's added.
    """

    submission_id: str
    entrypoint: str
    runtime_env: dict[str, Any]


def job_spec(
    options: RayPoolSettings,
    *,
    submission: str,
    python: str,
    environment: dict[str, str],
    slots: int,
) -> JobSpec:
    """The job of one run: its driver makes a placement group of ``slots`` bundles
    (``options.bundles``, ``options.strategy``) and runs one node per bundle.

    Arguments:
        options: the pool's settings.
        submission: the job's submission id.
        python: the Python on the Ray nodes that has Headway installed.
        environment: Headway's variables for the node processes (``HEADWAY_*``), which win
            over none of the admin's (the settings refuse ``HEADWAY_*`` in ``env_vars``).
        slots: the trial's ``slots_per_trial`` (one bundle each, at least one).
    """
    env_vars = {
        **dict(options.runtime_env.get("env_vars", {})),  # type: ignore[call-overload]
        **environment,
        "HEADWAY_RAY_BUNDLES": json.dumps(options.bundles(slots)),
        "HEADWAY_RAY_STRATEGY": options.strategy,
        "HEADWAY_RAY_PLACEMENT_GROUP": _client.group_name(submission),
    }
    runtime_env = {**options.runtime_env, "env_vars": env_vars}
    entrypoint = " ".join(shlex.quote(part) for part in (python, "-m", "workers.ray_node"))
    return JobSpec(submission, entrypoint, runtime_env)


def submit_queued_runs(namespace: str, pools: dict[str, ResourcePool]) -> list[str]:
    """Submit every queued, unplaced run of ``pools`` (ray pools by name) in ``namespace``;
    return the submission ids, in queue order (priority, then submission)."""
    submitted: list[str] = []
    for pk, pool in queued_runs(namespace, pools):
        try:
            found = _submit_run(pk, pools[pool], namespace)
        except _client.RayError as exc:
            logger.warning("run %s could not be submitted to Ray: %s", pk, exc)
            say(pk, f"waiting: Ray refused the job ({exc}); trying again")
            continue
        if found is not None:
            submitted.append(found)
    return submitted


def _submit_run(run_pk: int, pool: ResourcePool, namespace: str) -> str | None:
    """One run's hosts, tokens and job (see module); None when it was taken meanwhile.

    Raises:
        RayError: Ray refused the job, or an earlier try's job is still being stopped;
            nothing was written.
    """
    options = ray_settings(pool)
    submission = _client.submission_id(namespace, run_pk)
    with transaction.atomic():
        run = (
            TrialRun.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(id=run_pk, state=RunState.QUEUED, host__isnull=True)
            .first()
        )
        if run is None or run.slots_needed is None:
            return None  # taken meanwhile, or its config did not validate (the trial says so)
        slots = max(run.slots_needed, 1)
        job = RayJob.objects.create(run=run, pool=pool.name, submission_id=submission)
        devices = ["cpu0"]
        hosts = [
            WorkerHost.objects.create(
                name=bundle_host_name(run.pk, bundle),
                pool=pool.name,
                namespace=namespace,
                queue="",
                slots=1,
                devices=devices,
                heartbeat_at=None,
                made_for_run=run,
            )
            for bundle in range(slots)
        ]
        keys = [HostToken.issue(host.name)[1] for host in hosts]
        run.host, run.slots, run.devices = hosts[0], 1, devices
        run.heartbeat_at = timezone.now()
        run.save(update_fields=["host", "slots", "devices", "heartbeat_at"])
        RunShare.objects.bulk_create(
            RunShare(run=run, node_rank=node, host=host, slots=1, devices=devices)
            for node, host in enumerate(hosts[1:], start=1)
        )
        spec = job_spec(
            options,
            submission=submission,
            python=options.python or sys.executable,
            environment=_environment(run, pool, namespace, hosts, keys),
            slots=slots,
        )
        if not _client.submit(options.address, submission, spec.entrypoint, spec.runtime_env):
            _clear_earlier_try(options.address, submission)
            _client.submit(options.address, submission, spec.entrypoint, spec.runtime_env)
        job.state = "PENDING"
        job.save(update_fields=["state"])
    logger.info(
        "trial %s run %s submitted as Ray job %s (%s bundle(s), %s)",
        run.trial_id, run.run_id, submission, slots, options.strategy,
    )  # fmt: skip
    say(run.pk, f"waiting in Ray: job {submission} submitted to pool {pool.name}")
    return submission


def _clear_earlier_try(address: str, submission: str) -> None:
    """A job of this id exists from a try that did not commit: stop it and, once it ended,
    delete it so the id is free.

    Raises:
        RayError: it has not ended yet (the next poll tries again), or Ray is unreachable.
    """
    seen = _client.job(address, submission)
    if seen is not None and seen.active:
        _client.stop(address, submission)
        raise _client.RayError(f"job {submission} of an earlier try is being stopped")
    if seen is not None:
        _client.delete(address, submission)


def _environment(
    run: TrialRun, pool: ResourcePool, namespace: str, hosts: list[WorkerHost], keys: list[str]
) -> dict[str, str]:
    """What the driver and the node processes get from Headway."""
    options = ray_settings(pool)
    work_dir = options.work_dir or str(settings.HEADWAY_WORK_DIR)
    return {
        "HEADWAY_MASTER": options.master_url or settings.HEADWAY_MASTER_URL,
        "HEADWAY_QUEUE": namespace,
        "HEADWAY_RESOURCE_POOL": pool.name,
        "HEADWAY_TRIAL_ID": str(run.trial_id),
        "HEADWAY_RUN_ID": str(run.run_id),
        "HEADWAY_RAY_HOSTS": ",".join(host.name for host in hosts),
        "HEADWAY_RAY_HOST_KEYS": ",".join(keys),
        "HEADWAY_SLOTS": "1",
        "HEADWAY_WORK_DIR": work_dir,
        "HEADWAY_VAR_DIR": str(Path(work_dir)),
    }
