"""A run's ``shared_fs`` storage seen by all of its hosts: the chief writes a marker into it,
every other host reads it before starting its ranks (``headway.storage._shared_fs_check``).

Once per run start, before any rank trains: a host that does not see the chief's folder
refuses its share with a message naming the storage and both hosts, so checkpoints never land
on one host's local disk while the others resume from nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headway.client import wire
from headway.expconf import checkpoint_storage_json
from headway.storage import _shared_fs_check as shared_fs_check
from workers.config import settings
from workers.distributed import NodePlan


class SharedStorageRefused(Exception):
    """A ``shared_fs`` storage this host does not share with the run's chief host."""


def _storage(spec: wire.LaunchSpec) -> dict[str, Any]:
    return checkpoint_storage_json(spec.experiment_config)


def marker_writer(spec: wire.LaunchSpec) -> Callable[[str], None] | None:
    """What the chief does before publishing its rendezvous ``address:port`` to the other
    hosts: write it as the run's marker into its ``shared_fs`` storage; None for other
    storage types (S3 is one store for every host by construction)."""
    base = shared_fs_check.shared_fs_base(_storage(spec))
    if base is None:
        return None
    trial_id, run_id = spec.trial_id, spec.run_id

    def write(value: str) -> None:
        shared_fs_check.write_marker(base, trial_id, run_id, value)

    return write


def check_share(spec: wire.LaunchSpec, node: NodePlan) -> None:
    """Refuse this host's share before any rank starts when it does not see the marker the
    chief wrote into the run's ``shared_fs`` storage (one file read).

    Raises:
        SharedStorageRefused: naming the storage and both hosts.
    """
    storage = _storage(spec)
    base = shared_fs_check.shared_fs_base(storage)
    value = f"{node.chief_addr}:{node.port}"
    if base is None or shared_fs_check.marker_matches(base, spec.trial_id, spec.run_id, value):
        return
    chief = spec.chief_host or node.chief_addr
    raise SharedStorageRefused(
        shared_fs_check.refusal(storage, chief, [settings.HEADWAY_HOST_NAME])
    )


def forget(spec: wire.LaunchSpec) -> None:
    """Remove the run's marker once its chief's part ended (nothing for other storage)."""
    base = shared_fs_check.shared_fs_base(_storage(spec))
    if base is not None:
        shared_fs_check.remove_marker(base, spec.trial_id, spec.run_id)
