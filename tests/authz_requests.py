"""The requests of the authorization tests (``tests/registry/test_authorization_matrix.py``,
``tests/registry/test_workspace_roles.py``): the objects a fixture set made (``World``) and, for
each route of the URL conf, the URL and body of a plausible request about them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.urls import reverse

from tests.helpers import TINY_CONFIG, TINY_MODEL, b64


@dataclass
class World:
    users: dict[str, Any]
    tokens: dict[str, str]
    experiment: Any
    trial: Any
    checkpoint: Any
    model: Any
    other_experiment: Any
    workspace: Any = None
    project: Any = None


# -- requests -----------------------------------------------------------------------------------


def _place_kwargs(world: World, name: str) -> dict[str, Any]:
    """The URL kwargs of a workspace or project route ({} for the lists and other routes)."""
    place = {"workspace": world.workspace, "project": world.project}.get(name.split("-")[0])
    if place is None or name.endswith("-list"):
        return {}
    if name == "workspace-member":  # the owner's own admin binding
        from registry.models import RoleBinding

        binding = RoleBinding.objects.get(workspace=world.workspace, user=world.users["owner"])
        return {"pk": place.id, "binding_id": binding.id}
    return {"pk": place.id}


def _webhook_kwargs(name: str) -> dict[str, Any]:
    """A webhook route's id: there is none (an admin gets 404, anyone else 403 before the lookup)."""
    return {"webhook_id": 1} if name.startswith("webhook-") and name != "webhook-list" else {}


def api_request(world: World, name: str, method: str) -> tuple[str, dict | None]:
    """The URL and JSON body of a plausible request to ``name``; objects are the owner's."""
    e, t, c, m = world.experiment, world.trial, world.checkpoint, world.model
    kwargs: dict[str, Any] = _place_kwargs(world, name) | _webhook_kwargs(name)
    if name.startswith("experiment-") and name != "experiment-list":
        kwargs = {"pk": e.id}

    elif name.startswith("trial-") and name != "trial-list":
        kwargs = {"pk": t.id}
    elif name.startswith("checkpoint-"):
        kwargs = {"uuid": c.uuid}
    elif name == "worker-detail":
        kwargs = {"name": "mx-host"}
    elif name == "model-detail":
        kwargs = {"name": m.name}
    elif name == "model-version-list":
        kwargs = {"model_name": m.name}
    elif name == "model-version-detail":
        kwargs = {"model_name": m.name, "version": 1}
    elif name in ("model-alias-list", "model-alias-history"):
        kwargs = {"model_name": m.name}
    elif name in ("model-alias-detail", "model-alias-resolve"):
        kwargs = {"model_name": m.name, "alias": "champion"}
    elif name.startswith(("host-run-", "host-share-")):
        kwargs = {"trial_id": t.id, "run_id": t.run_id}
        kwargs |= {"node_rank": 1} if name.startswith("host-share-") else {}
    elif name in (
        "host-token-detail",
        "admin-host-detail",
        "admin-host-disable",
        "admin-host-enable",
    ):
        kwargs = {"name": "mx-host"}
    elif name == "resource-pool-node-enable":
        kwargs = {"pool": "default", "node": "mx-node"}
    elif name in ("unmanaged-heartbeat", "unmanaged-exit", "unmanaged-logs"):
        kwargs = {"trial_id": t.id, "run_id": t.run_id}
    elif name == "unmanaged-checkpoint-file":
        kwargs = {"trial_id": t.id, "run_id": t.run_id, "storage_id": str(uuid.uuid4())}
    bodies: dict[tuple[str, str], dict] = {
        ("login", "post"): {"username": "mx-owner", "password": "pw-owner"},
        ("experiment-list", "post"): {"config": TINY_CONFIG, "model_definition": b64(TINY_MODEL)},
        ("trial-checkpoints", "post"): {
            "uuid": str(uuid.uuid4()),
            "steps_completed": 5,
            "resources": {"state-dict.pth": 3},
        },
        ("trial-metrics", "post"): {
            "reports": [{"group": "training", "steps_completed": 1, "metrics": {"loss": 1.0}}]
        },
        ("trial-preempt-ack", "post"): {"run_id": t.run_id},
        ("trial-progress", "post"): {"progress": 0.5},
        ("checkpoint-metadata", "post"): {"metadata": {"note": "mx"}},
        ("trial-searcher-completed", "post"): {"length": 10, "metric": 0.5},
        ("trial-searcher-early-exit", "post"): {"reason": "errored"},
        ("trial-continue-trial", "post"): {},
        ("model-list", "post"): {"name": "mx-new"},
        ("workspace-list", "post"): {"name": "mx-new-workspace"},
        ("workspace-detail", "patch"): {"everyone_role": "viewer"},
        ("workspace-members", "post"): {"user": "mx-other", "role": "viewer"},
        ("project-list", "post"): {"workspace": world.workspace.id, "name": "mx-new"},
        ("experiment-move", "post"): {"project": world.project.id},
        ("model-detail", "patch"): {"description": "changed"},
        ("model-version-list", "post"): {"checkpoint_uuid": str(c.uuid)},
        ("model-version-detail", "patch"): {"comment": "changed"},
        ("model-alias-detail", "put"): {"version": 1},
        ("experiment-detail", "patch"): {"notes": "changed"},
        ("trial-detail", "patch"): {"notes": "changed"},
        ("host-token-list", "post"): {"name": "mx-host"},
        ("unmanaged-start", "post"): {"config": {"name": "mx-unmanaged"}},
        ("unmanaged-exit", "post"): {"exit_code": 0},
        ("unmanaged-logs", "post"): {"lines": [{"message": "mx line", "position": 1}]},
    }
    return reverse(f"registry-api:{name}", kwargs=kwargs), bodies.get((name, method))


def _view_request(world: World, name: str) -> tuple[str, dict]:
    """Saved views: save one on the experiment or the list; delete the owner's view."""
    from dashboard.models import SavedView

    e = world.experiment
    if name == "experiment-view-save":
        data = {"name": "mx-view", "filter": "hparams.lr > 0", "sort": "-id"}
        return reverse("dashboard:experiment-view-save", args=[e.id]), data
    if name == "list-view-save":
        return reverse("dashboard:list-view-save"), {"name": "mx-list-view", "filter": "id > 0"}
    view, _ = SavedView.objects.get_or_create(
        owner=world.users["owner"], experiment=e, name="mx-owners-view"
    )
    return reverse("dashboard:view-delete", args=[view.id]), {}


def dashboard_request(world: World, name: str, action: str | None) -> tuple[str, dict]:
    e, t, m = world.experiment, world.trial, world.model
    places = {"workspace": {"workspace_id": world.workspace.id}}
    kwargs: dict[str, Any] = places.get(name, {}) | (
        {"project_id": world.project.id} if name == "project" else {}
    )
    data: dict[str, Any] = {}
    if name in (
        "experiment",
        "experiment-live",
        "experiment-files",
        "experiment-trials",
        "experiment-trials-data",
        "experiment-trials-csv",
        "experiment-trials-ids",
    ):
        kwargs = {"experiment_id": e.id}
    elif name in ("experiment-view-save", "list-view-save", "view-delete"):
        return _view_request(world, name)
    elif name in ("experiment-edit", "experiment-notes"):
        kwargs = {"experiment_id": e.id}
        data = {"name": "changed", "notes": "changed"}
    elif name in ("trial", "trial-logs", "trial-logs-download", "trial-continue", "trial-menu"):
        kwargs = {"trial_id": t.id}
    elif name == "trial-notes":
        kwargs = {"trial_id": t.id}
        data = {"notes": "changed"}
    elif name == "model-edit":
        kwargs = {"name": m.name}
        data = {"description": "changed"}
    elif name == "model-version-edit":
        kwargs = {"name": m.name, "version": 1}
        data = {"comment": "changed"}
    elif name in ("experiment-control", "trial-control", "host-control"):
        objects = {
            "experiment-control": {"experiment_id": e.id},
            "trial-control": {"trial_id": t.id},
            "host-control": {"name": "mx-host"},
        }
        kwargs = objects[name] | {"action": action}
    elif name in ("model", "model-archive"):
        kwargs = {"name": m.name}
        data = {"archived": "true"}
    elif name == "model-version-delete":
        kwargs = {"name": m.name, "version": 1}
    elif name == "experiments-bulk":
        data = {"action": action, "experiment": [e.id]}
    elif name == "model-create":
        data = {"name": "mx-dash"}
    elif name == "model-register":
        data = {"checkpoint": str(world.checkpoint.uuid), "model": "mx-registered"}
    elif name == "compare":
        return reverse("dashboard:compare") + f"?trial={t.id}", data
    return reverse(f"dashboard:{name}", kwargs=kwargs), data
