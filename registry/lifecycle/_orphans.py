"""Orphaned checkpoint files: uploaded, never registered, provably Headway's, then deleted.

An orphan is a storage id in one storage place (an experiment's ``checkpoint_storage`` or the
root of one of the admin's storage locations, resolved against the locations with
``registry_storage_manager``; a stored config outside them is logged and skipped) that

- is a canonical uuid (anything else in a folder or bucket is not Headway's);
- no ``Checkpoint`` row of any experiment has (a shared_fs location is shared by experiments);
- has its newest file older than ``HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS``, so an upload in
  progress, or one whose registration is being retried, is never taken;
- has a marker (``headway.storage.MARKER_FILE``, written first by every SDK ``store_path``)
  naming that uuid and a trial the caller owns there.

Two passes apply these rules and differ only in that last one:

- one experiment's checkpoint GC pass (``delete_orphans`` from ``checkpoint_gc``, when the
  experiment ends and on request): the marker names one of the experiment's trials;
- the sweep (``checkpoint_orphan_sweep``, the ``headway.checkpoint_orphan_sweep`` task sent by
  the master worker's Celery beat every ``HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS``): every
  admin location's root and every place an experiment stores in, each listed once per pass;
  the marker names an ended trial (COMPLETED, CANCELED or ERROR, so no process of ours is still
  writing it) whose experiment stores in that same place. It catches what the experiment's end
  was too early for (files younger than the grace then) and crashed uploads of experiments that
  have not ended.

Bound: a pass lists each place once (a walk of every checkpoint folder on shared_fs, a paged
listing of the prefix on S3) and then reads the markers of, and deletes, at most
``MAX_CANDIDATES`` ids per place; beyond that a random sample, so ids kept every pass (not
ours) cannot hold the others back; the rest wait for the next pass.
"""

from __future__ import annotations

import json
import logging
import random
import uuid as uuid_lib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from registry.errors import InvalidInput
from registry.models import TERMINAL_STATES, Checkpoint, Experiment, Trial
from registry.storage_endpoints import registry_storage_manager
from registry.storage_locations import RETENTION_FIELDS, locations, resolve_storage

logger = logging.getLogger("registry.checkpoints")

MAX_CANDIDATES = 1000  # ids per place and pass whose marker is read (and which may be deleted)
_LOOKUP_CHUNK = 1000  # uuids per "is it registered" query (SQLite bounds a statement's variables)

# Given the trial ids that candidates' markers name, those whose files may be deleted here.
Owners = Callable[[set[int]], set[int]]


@dataclass
class SweepResult:
    """What one sweep did: places listed, places that failed to list, orphans deleted."""

    listed: int = 0
    failed: int = 0
    deleted: list[str] = field(default_factory=list)


def _canonical_uuid(storage_id: str) -> bool:
    try:
        return str(uuid_lib.UUID(storage_id)) == storage_id
    except ValueError:
        return False


def _registered(ids: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[start : start + _LOOKUP_CHUNK]
        rows = Checkpoint.objects.filter(uuid__in=chunk).values_list("uuid", flat=True)
        found.update(str(u) for u in rows)
    return found


def _candidates(present: dict[str, datetime], *, grace: timedelta, now: datetime) -> list[str]:
    old = sorted(
        sid for sid, modified in present.items() if _canonical_uuid(sid) and modified < now - grace
    )
    registered = _registered(old)
    left = [sid for sid in old if sid not in registered]
    if len(left) > MAX_CANDIDATES:
        left = sorted(random.sample(left, MAX_CANDIDATES))
    return left


def _remove_orphans(
    storage: dict[str, Any], *, owners: Owners, grace: timedelta, now: datetime
) -> tuple[list[str], int] | None:
    """Delete the orphans of one place (the module docstring's rules, ``owners`` the last);
    return the deleted ids and how many unregistered old uuids were kept, or None when the
    place could not be listed (logged; the next pass tries again)."""
    try:
        manager = registry_storage_manager(storage)
        present = manager.list_storage_ids()
    except NotImplementedError:
        return [], 0
    except Exception as exc:  # any backend error (OSError, botocore, a bad config): next pass
        logger.warning("listing checkpoint storage %s for orphans failed: %s", storage, exc)
        return None
    candidates = _candidates(present, grace=grace, now=now)
    marked: dict[str, int] = {}
    for storage_id in candidates:
        try:
            marker = manager.read_marker(storage_id)
        except Exception as exc:  # as above: logged, retried by the next pass
            logger.warning("reading the marker of checkpoint files %s failed: %s", storage_id, exc)
            continue
        owner = None if marker is None else marker.get("trial_id")
        if type(owner) is int:
            marked[storage_id] = owner
    allowed = owners(set(marked.values())) if marked else set()
    removed = []
    for storage_id, owner in marked.items():
        if owner not in allowed:
            continue  # not provably a checkpoint of a trial storing here: not ours
        try:
            manager.delete(storage_id)
        except Exception as exc:  # as above
            logger.warning("deleting orphaned checkpoint files %s failed: %s", storage_id, exc)
            continue
        logger.info("deleted orphaned checkpoint files %s (no registered checkpoint)", storage_id)
        removed.append(storage_id)
    return removed, len(candidates) - len(removed)


def delete_orphans(
    storage: dict[str, Any], *, trial_ids: set[int], grace: timedelta, now: datetime
) -> list[str]:
    """Delete the orphans in ``storage`` (an experiment's ``checkpoint_storage`` dict) whose
    marker names one of ``trial_ids`` (its trials); see the module docstring for the rules.

    Returns the deleted ids. A storage outside the locations, a backend that cannot list, or
    one that fails, is logged and skipped (the next pass tries again).
    """
    outcome = _remove_orphans(storage, owners=lambda named: named & trial_ids, grace=grace, now=now)
    return [] if outcome is None else outcome[0]


def _place(storage: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """``(key, resolved config)`` of the place a ``checkpoint_storage`` dict stores in (equal
    keys for equal places however they were written), or None when it lies outside the
    locations."""
    try:
        resolved = resolve_storage(storage, field="checkpoint_storage")
    except (InvalidInput, TypeError, ValueError):
        return None  # outside every location: `manage.py storage_locations_check` lists those
    place = {k: v for k, v in resolved.items() if k not in RETENTION_FIELDS}
    return json.dumps(place, sort_keys=True, default=str), place


def _places(stored: Iterable[dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for storage in stored:
        place = _place(storage)
        if place is not None:
            found.setdefault(*place)
    return found


def _ended_trials_storing_at(key: str) -> Owners:
    def owners(named: set[int]) -> set[int]:
        rows = Trial.objects.filter(id__in=named, state__in=TERMINAL_STATES).values_list(
            "id", "experiment__config__checkpoint_storage"
        )
        places = {trial_id: _place(storage) for trial_id, storage in rows}
        return {trial_id for trial_id, place in places.items() if place and place[0] == key}

    return owners


def checkpoint_orphan_sweep(*, now: datetime | None = None) -> SweepResult:
    """Delete the orphans of every admin storage location's root and of every place the
    experiments store in (see the module docstring), listing each place once.

    Arguments:
        now: the time orphans' ages are measured at (default: now).

    Returns:
        The places listed, those that failed to list (each logged and skipped), and the
        deleted ids.
    """
    grace = timedelta(seconds=settings.HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS)
    now = now or timezone.now()
    roots = [location.storage_config() for location in locations().locations.values()]
    stored = (
        Experiment.objects.order_by()
        .values_list("config__checkpoint_storage", flat=True)
        .distinct()
    )
    result = SweepResult()
    for key, storage in sorted(_places([*roots, *stored]).items()):
        outcome = _remove_orphans(
            storage, owners=_ended_trials_storing_at(key), grace=grace, now=now
        )
        if outcome is None:
            result.failed += 1
            continue
        result.listed += 1
        removed, kept = outcome
        result.deleted += removed
        if removed or kept:
            logger.info(
                "orphan sweep of %s: %d deleted, %d unregistered kept (no marker naming an "
                "ended trial that stores there)",
                storage,
                len(removed),
                kept,
            )
    return result
