"""Migration 0011: the old ``pool`` values (each row's ``HEADWAY_QUEUE``) become ``namespace``,
and every existing host and run joins the one pool there was, ``default``."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("registry", "0010_host_token")]
AFTER = [("registry", "0011_resource_pools_and_namespaces")]


@pytest.mark.django_db(transaction=True)
def test_old_pools_become_namespaces_and_everything_joins_default(django_user_model):
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()  # every app: webhooks depends on registry
    executor.migrate(BEFORE)
    try:
        apps = executor.loader.project_state(BEFORE).apps
        owner = apps.get_model("auth", "User").objects.create(username="old-owner")
        experiment = apps.get_model("registry", "Experiment").objects.create(
            owner_id=owner.id, config={}
        )
        trial = apps.get_model("registry", "Trial").objects.create(experiment=experiment)
        host = apps.get_model("registry", "WorkerHost").objects.create(
            name="old-host", pool="cluster-q", queue="cluster-q.host.old-host"
        )
        apps.get_model("registry", "TrialRun").objects.create(
            trial=trial, run_id=1, state="QUEUED", pool="cluster-q", host=host
        )

        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        host = apps.get_model("registry", "WorkerHost").objects.get(name="old-host")
        run = apps.get_model("registry", "TrialRun").objects.get(trial_id=trial.id)
        assert (host.pool, host.namespace, host.queue) == (
            "default",
            "cluster-q",
            "cluster-q.host.old-host",
        )
        assert (run.pool, run.namespace) == ("default", "cluster-q")

        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)  # and back: the namespace is the pool again
        apps = executor.loader.project_state(BEFORE).apps
        assert apps.get_model("registry", "WorkerHost").objects.get(name="old-host").pool == (
            "cluster-q"
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
