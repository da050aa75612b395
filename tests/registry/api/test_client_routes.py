"""Every route of ``RegistryAPI``'s table is a URL of the registry's URLconf whose view
answers the route's method: a renamed or removed endpoint fails here, not in a trial."""

from __future__ import annotations

import string
import uuid

import pytest
from django.urls import Resolver404, resolve

from headway.client._routes import ROUTES

SAMPLES = {
    "trial_id": 3,
    "run_id": 2,
    "node_rank": 1,
    "experiment_id": 5,
    "uuid": str(uuid.uuid4()),
    "name": "my-model.v2",
    "version": 4,
    "storage_id": str(uuid.uuid4()),
    "pool": "hpc",
    "node": "node-01",
    "alias": "champion",
    "workspace_id": 8,
    "project_id": 9,
    "webhook_id": 7,
    "binding_id": 6,
}


def _url(template: str) -> str:
    fields = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    return "/api/v1/" + template.format(**{field: SAMPLES[field] for field in fields})


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_every_route_resolves_to_a_view_that_takes_its_method(name: str) -> None:
    method, template = ROUTES[name]
    url = _url(template)
    try:
        match = resolve(url)
    except Resolver404:
        pytest.fail(f"{name}: {method} {url} is not a registry URL")
    assert match.namespace == "registry-api", (name, url)
    view = match.func
    actions = getattr(view, "actions", None)  # a ViewSet route: HTTP method -> action
    if actions is not None:
        assert method.lower() in actions, (name, url, actions)
    else:
        assert hasattr(view.cls, method.lower()), (name, url, view.cls)  # type: ignore[attr-defined]


def test_placeholders_reach_the_views_arguments() -> None:
    match = resolve(_url(ROUTES["run_spec"][1]))
    assert match.kwargs == {"trial_id": 3, "run_id": 2}
    match = resolve(_url(ROUTES["model_version_get"][1]))
    assert match.kwargs == {"model_name": "my-model.v2", "version": "4"}
    match = resolve(_url(ROUTES["checkpoint_download"][1]))
    assert match.kwargs == {"uuid": SAMPLES["uuid"]}
