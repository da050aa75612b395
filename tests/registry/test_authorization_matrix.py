"""Authorization matrix: every ``/api/v1/`` and dashboard route x seven principals.

The routes come from the URL conf (``get_resolver()``), so a new route without an expectation in
``API`` / ``DASHBOARD`` (``tests/authz_expectations.py``) fails
``test_every_route_has_an_expectation`` (and its matrix cases) naming it. Principals:
anonymous, another user, the owner, an admin, this trial's run token, another trial's run token
and an ended run's token. The rule (``registry.authz``):

- reads: every logged-in user (team visibility); run tokens only the SDK endpoints of their own
  trial, plus checkpoint metadata and downloads (a run may warm-start from any checkpoint);
- changes and deletions: the owner or an admin, else 403 (dashboard: 403, or an error note with
  nothing changed); creating (experiments, models): every user;
- a trial's own data (metrics, checkpoints, progress, searcher reports, preemption acks): its
  live run's token or its owner; admins and other runs get 403;
- anonymous and ended-run tokens: 401 on the API, the login page on the dashboard.

One fixture set per module; each case runs in its own rolled-back transaction, so the Celery
tasks a write queues with ``transaction.on_commit`` are never sent (no worker needed).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.authz_expectations import (
    ADMIN,
    API,
    CREATE,
    DASHBOARD,
    HOST_AGENT,
    OWNER,
    PRINCIPALS,
    PUBLIC,
    READ,
    READ_ANY_RUN,
    READ_OWN_RUN,
    TRIAL_DATA,
    matrix_cases,
    route_kind,
    url_conf_routes,
)
from tests.authz_requests import World, api_request, dashboard_request
from tests.helpers import TINY_CONFIG, TINY_MODEL, register_host, start_run


def test_every_route_has_an_expectation() -> None:
    routes = url_conf_routes()
    missing = sorted(
        f"{route} {method.upper()}"
        for route, methods in routes.items()
        for method in (methods or [DASHBOARD.get(route.split(":")[1], ("?", ""))[0]])
        if route_kind(route, method) is None
    )
    assert not missing, f"routes without an authorization expectation: {missing}"
    expected = {f"registry-api:{name}" for name, _ in API} | {f"dashboard:{n}" for n in DASHBOARD}
    stale = sorted(expected - set(routes))
    assert not stale, f"expectations for routes that no longer exist: {stale}"


# -- the fixture set ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from registry import lifecycle, model_aliases, model_registry, workspaces
    from registry.models import (
        Experiment,
        ModelVersion,
        Project,
        RegisteredModel,
        RunState,
        WorkerHost,
        Workspace,
    )
    from tests.helpers import register_checkpoint

    storage = tmp_path_factory.mktemp("authz-ckpt")
    config = TINY_CONFIG + f"checkpoint_storage: {{type: shared_fs, host_path: {storage}}}\n"
    with django_db_blocker.unblock():
        users_model = get_user_model()
        users = {
            "owner": users_model.objects.create_user("mx-owner", password="pw-owner"),
            "other": users_model.objects.create_user("mx-other"),
            "admin": users_model.objects.create_user("mx-admin", is_staff=True),
        }
        experiment = lifecycle.experiment_create(
            owner=users["owner"], config_source=config, model_definition=TINY_MODEL
        )
        trial = experiment.trials.get()
        ended = start_run(trial)
        lifecycle.trial_run_exited(trial_id=trial.id, run_id=ended.run_id, exit_code=1)
        trial.refresh_from_db()
        this_run = start_run(trial)
        assert this_run.run_id != ended.run_id
        ended.refresh_from_db()
        assert ended.state == RunState.EXITED
        other_experiment = lifecycle.experiment_create(
            owner=users["other"], config_source=config, model_definition=TINY_MODEL
        )
        other_run = start_run(other_experiment.trials.get())
        checkpoint = register_checkpoint(trial, run_id=this_run.run_id)
        model = model_registry.model_create(owner=users["owner"], name="mx-model")
        model_registry.version_register(
            model=model, user=users["owner"], checkpoint_uuid=checkpoint.uuid
        )
        model_aliases.alias_set(model=model, alias="champion", version=1, user=users["owner"])
        register_host("mx-host", 1)
        tokens = {name: Token.objects.create(user=user).key for name, user in users.items()}
        tokens |= {
            "this_run": this_run.token,
            "other_run": other_run.token,
            "ended_run": ended.token,
        }
        trial.refresh_from_db()
        workspace = workspaces.workspace_create(owner=users["owner"], name="mx-workspace")
        project = workspaces.project_create(
            owner=users["owner"], workspace_id=workspace.id, name="mx-project"
        )
        yield World(
            users,
            tokens,
            experiment,
            trial,
            checkpoint,
            model,
            other_experiment,
            workspace,
            project,
        )
        ModelVersion.objects.filter(model__name__startswith="mx-").delete()
        RegisteredModel.objects.filter(owner__username__startswith="mx-").delete()
        Experiment.objects.filter(owner__username__startswith="mx-").delete()
        Project.objects.filter(owner__username__startswith="mx-").delete()
        Workspace.objects.filter(owner__username__startswith="mx-").delete()
        WorkerHost.objects.filter(name="mx-host").delete()
        users_model.objects.filter(username__startswith="mx-").delete()


def _snapshot(world: World) -> tuple:
    """What a refused request must leave unchanged."""
    from registry.models import (
        Checkpoint,
        Experiment,
        MetricReport,
        ModelVersion,
        RegisteredModel,
        Trial,
    )

    return (
        list(
            Experiment.objects.order_by("id").values_list(
                "id", "state", "archived", "name", "notes"
            )
        ),
        list(
            Trial.objects.order_by("id").values_list("id", "state", "run_id", "progress", "notes")
        ),
        list(Checkpoint.objects.order_by("uuid").values_list("uuid", "state")),
        list(RegisteredModel.objects.order_by("id").values_list("id", "archived", "description")),
        list(ModelVersion.objects.order_by("id").values_list("id", "comment")),
        MetricReport.objects.count(),
    )


# -- the matrix ---------------------------------------------------------------------------------


def _api_expected(kind: str, principal: str, name: str) -> int | str:
    """401, 403 or "allowed" for an API request of ``kind`` by ``principal``."""
    if kind == PUBLIC:
        return "allowed"
    if principal in ("anonymous", "ended_run"):
        return 401
    if kind == HOST_AGENT:  # host tokens only (tests/registry/api/test_host_api_access.py has them)
        return 403
    if kind == ADMIN:
        return "allowed" if principal == "admin" else 403
    run_ok = {
        READ_OWN_RUN: ("this_run",),
        READ_ANY_RUN: ("this_run", "other_run"),
        TRIAL_DATA: ("this_run",),
    }.get(kind, ())
    if principal in ("this_run", "other_run"):
        return "allowed" if principal in run_ok else 403
    # The owner's workspace is private (a new workspace's default): another user has no role
    # there, so its routes (and its project's) answer 404, lists leave it out.
    place_route = name.startswith(("workspace-", "project-")) and not name.endswith("-list")
    if principal == "other" and place_route:
        return 404
    if kind in (READ, READ_OWN_RUN, READ_ANY_RUN, CREATE):
        return "allowed"
    if kind == OWNER:
        return "allowed" if principal in ("owner", "admin") else 403
    return "allowed" if principal == "owner" else 403  # TRIAL_DATA


def _is_allowed(status: int) -> bool:
    return status not in (401, 403) and status < 500


@pytest.mark.parametrize("principal", PRINCIPALS)
@pytest.mark.parametrize(
    ("route", "method", "action"),
    matrix_cases(),
    ids=lambda v: v if isinstance(v, str) else "-",
)
def test_authorization_matrix(
    world: World, db, principal: str, route: str, method: str, action: str | None
) -> None:
    namespace, name = route.split(":")
    kind = route_kind(route, method)
    if kind is None:
        pytest.fail(f"{route} {method.upper()} has no authorization expectation")
    before = _snapshot(world)
    if namespace == "registry-api":
        client = APIClient()
        if principal != "anonymous":
            client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens[principal]}")
        url, body = api_request(world, name, method)
        response = getattr(client, method)(url, body, format="json")
        expected = _api_expected(kind, principal, name)
    else:
        session = Client()
        if principal in world.users:
            session.force_login(world.users[principal])
        url, data = dashboard_request(world, name, action)
        # Tokens do not log into the dashboard: a token-only request is anonymous there.
        headers = {}
        if principal in world.tokens and principal not in world.users:
            headers = {"Authorization": f"Token {world.tokens[principal]}"}
        response = getattr(session, method)(url, data, headers=headers)
        if principal not in world.users:
            expected = "login"
        elif (kind == OWNER and principal == "other") or (kind == ADMIN and principal != "admin"):
            expected = 403
        else:
            expected = "allowed"
    status = response.status_code
    what = f"{method.upper()} {url} as {principal}: {status}"
    if expected == "allowed":
        # health/ answers 503 while a component is down (no master worker runs here): allowed.
        assert _is_allowed(status) or (name == "health" and status == 503), what
    elif expected == "login":
        assert status == 302 and response["Location"].startswith("/accounts/login/"), what
    elif namespace == "dashboard":
        # A refused dashboard control: 403, or a note on the page it goes back to; either way
        # nothing changed.
        assert status in (302, 403), what
        assert _snapshot(world) == before, f"{what} changed state"
    else:
        assert status == expected, f"{what}, expected {expected}"
        assert _snapshot(world) == before, f"{what} changed state"


def test_finding_no_owner_check_on_any_write(world: World, db) -> None:
    """Security review, High: another user could pause, kill or archive anyone's experiment and post
    metrics or checkpoints to their trials. Now each answers 403 and changes nothing."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.tokens['other']}")
    before = _snapshot(world)
    e, t = world.experiment.id, world.trial.id
    requests: list[tuple[str, dict | None]] = [
        (f"/api/v1/experiments/{e}/kill/", None),
        (f"/api/v1/experiments/{e}/archive/", None),
        (f"/api/v1/trials/{t}/pause/", None),
        (f"/api/v1/trials/{t}/metrics/", {"reports": []}),
        (
            f"/api/v1/trials/{t}/checkpoints/",
            {"uuid": str(uuid.uuid4()), "steps_completed": 10**9, "resources": {"x": 1}},
        ),
    ]
    for url, body in requests:
        response = client.post(url, body, format="json")
        assert response.status_code == 403, (url, response.content)
        assert "owner" in response.json()["detail"]
    assert _snapshot(world) == before


def test_the_dashboard_hides_controls_a_user_may_not_use(world: World, db) -> None:
    """Experiment and trial controls are shown only when legal and permitted."""
    pages = [
        reverse("dashboard:experiment", args=[world.experiment.id]),
        reverse("dashboard:trial", args=[world.trial.id]),
    ]
    for principal, shown in (("owner", True), ("admin", True), ("other", False)):
        client = Client()
        client.force_login(world.users[principal])
        for page in pages:
            html = client.get(page).content.decode()
            assert ("/control/pause" in html) is shown, (principal, page)


def test_finding_the_schema_and_swagger_ui_are_public(world: World, db) -> None:
    """Security review, Low: the OpenAPI schema and Swagger UI answered anonymous requests."""
    for url in (reverse("registry-api:schema"), reverse("registry-api:schema-ui")):
        assert Client().get(url).status_code == 401, url
        logged_in = Client()
        logged_in.force_login(world.users["other"])
        assert logged_in.get(url).status_code == 200, url


def test_a_refused_dashboard_control_says_why(world: World, db) -> None:
    client = Client()
    client.force_login(world.users["other"])
    url = reverse("dashboard:experiment-control", args=[world.experiment.id, "kill"])
    response = client.post(url)
    assert response.status_code == 403
    assert f"Only the owner of experiment {world.experiment.id}" in response.content.decode()
