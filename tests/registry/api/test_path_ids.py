"""Ids in URL paths are database ids: one past the largest bigint is a 404, never a 500.

schemathesis found ``POST host-agent/trials/69719597829700756113964662784/runs/95/claim/``
answering 500 (the driver's overflow). Every ``<db_id:...>`` route of the API and the
dashboard now resolves up to 2**63 - 1 and not beyond.
"""

from __future__ import annotations

import pytest
from django.urls import Resolver404, resolve

from registry.path_converters import DB_ID_MAX

pytestmark = pytest.mark.django_db

ROUTES = [
    "/api/v1/host-agent/trials/{id}/runs/1/exit/",
    "/api/v1/host-agent/trials/1/runs/{id}/logs/",
    "/api/v1/host-agent/trials/1/runs/1/shares/{id}/running/",
    "/experiments/{id}/",
    "/trials/{id}/logs/",
]
# The router's routes take any id and look it up (DRF's get_object_or_404).
ROUTER_ROUTES = [
    "/api/v1/trials/{id}/metrics.csv",
    "/api/v1/trials/{id}/",
    "/api/v1/trials/{id}/metrics/",
    "/api/v1/experiments/{id}/",
    "/api/v1/experiments/{id}/trials/",
]


@pytest.mark.parametrize("route", ROUTES)
def test_the_largest_bigint_resolves_and_one_more_does_not(route: str) -> None:
    assert resolve(route.format(id=DB_ID_MAX)).kwargs  # matched, the id handed to the view
    with pytest.raises(Resolver404):
        resolve(route.format(id=DB_ID_MAX + 1))


@pytest.mark.parametrize("route", ROUTES + ROUTER_ROUTES)
def test_a_huge_id_is_a_404(api, route: str) -> None:
    path = route.format(id=69719597829700756113964662784)
    method = api.post if "/host-agent/" in route else api.get
    assert method(path).status_code == 404


@pytest.mark.parametrize(
    "route", ["/api/v1/trials/{id}/metrics/", "/api/v1/trials/{id}/checkpoints/"]
)
def test_a_write_to_a_huge_trial_id_is_a_404(api, route: str) -> None:
    path = route.format(id=69719597829700756113964662784)
    bodies = {
        "metrics": {"reports": [{"group": "training", "steps_completed": 1, "metrics": {"a": 1}}]},
        "checkpoints": {
            "uuid": "6f1c1f0e-2b5e-4c1a-9d3e-1f2a3b4c5d6e",
            "steps_completed": 1,
            "resources": {},
        },
    }
    body = bodies["metrics" if "metrics" in route else "checkpoints"]
    assert api.post(path, body, format="json").status_code == 404
