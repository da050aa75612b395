"""``python manage.py storage_locations_check``: what the storage locations leave out.

Upgrading to admin-named storage locations keeps every stored experiment and
checkpoint whose place lies inside a location; the others are refused at use (downloads,
deletion, GC). This lists those, grouped by place with the reason, so an administrator can add
a location for them (docs/deployment.md, "Upgrading"). Exit status 1 when there are any.
"""

from __future__ import annotations

import json
from collections import defaultdict

from django.core.management.base import BaseCommand, CommandError

from registry.errors import InvalidInput
from registry.models import Checkpoint, CheckpointState, Experiment
from registry.storage_locations import resolve_storage


def _problem(storage: dict) -> str | None:
    try:
        resolve_storage(storage, field="checkpoint_storage")
    except InvalidInput as exc:
        return "; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in exc.errors.items())
    return None


class Command(BaseCommand):
    help = "List experiments and checkpoints whose checkpoint storage is outside every location."

    def handle(self, *args: object, **options: object) -> None:
        # place (as JSON) -> (reason, experiment ids); checkpoints per place
        outside: dict[str, tuple[str, set[int]]] = {}
        counts: dict[str, int] = defaultdict(int)
        experiments = Experiment.objects.not_deleted()
        for experiment in experiments.only("id", "config").iterator():
            storage = experiment.stored_checkpoint_storage()
            reason = _problem(storage)
            if reason is not None:
                key = json.dumps(storage, sort_keys=True)
                outside.setdefault(key, (reason, set()))[1].add(experiment.id)
        live = Checkpoint.objects.exclude(state=CheckpointState.DELETED)
        for storage, experiment_id in live.values_list("storage", "trial__experiment_id"):
            key = json.dumps(storage or {}, sort_keys=True)
            if key not in outside:
                reason = _problem(storage or {})
                if reason is None:
                    continue
                outside[key] = (reason, set())
            outside[key][1].add(experiment_id)
            counts[key] += 1
        if not outside:
            self.stdout.write("Every experiment and checkpoint is inside a storage location.")
            return
        for key, (reason, ids) in sorted(outside.items()):
            self.stdout.write(
                f"{key}\n  experiments {', '.join(map(str, sorted(ids)))}; "
                f"{counts[key]} checkpoint(s)\n  {reason}"
            )
        raise CommandError(
            f"{len(outside)} storage place(s) outside the storage locations "
            "(HEADWAY_STORAGE_LOCATIONS): add locations holding them to keep serving them"
        )
