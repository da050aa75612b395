"""A Slurm node on which runs keep being lost before their ranks start is excluded from the
pool's later jobs (``registry.pools.slurm._nodes``), with the reason shown with the pool; a run that
starts on a job resets its nodes' counts, and an admin's enable puts a node back."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

import pytest
from django.conf import settings as django_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from registry import lifecycle
from registry.lifecycle._host_health import host_started_a_run
from registry.models import Trial, TrialLog, WorkerHost
from registry.pools.slurm._commands import expand_hostlist, hostnames
from registry.pools.slurm._script import JobLayout, job_script
from registry.pools.slurm.manager import (
    SlurmError,
    SlurmNodeNotFound,
    excluded_nodes,
    node_enable,
    nodes_failed_start,
    nodes_started,
)
from registry.pools.slurm.models import SlurmJob, SlurmNode
from registry.pools.slurm.settings import SlurmPoolSettings
from tests.helpers import TINY_MODEL
from tests.registry.pools.slurm.test_script import _options

pytestmark = pytest.mark.django_db

POOL = "hpc"


@pytest.fixture
def trial(django_user_model) -> Trial:
    owner = django_user_model.objects.create_user("slurm-nodes")
    config = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
    }
    return lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    ).trials.get()


@pytest.fixture
def slurm_pool(settings, tmp_path):
    pools = tmp_path / "pools.yaml"
    pools.write_text(f"- {{name: {POOL}, type: slurm, partition: debug}}\n")
    settings.HEADWAY_RESOURCE_POOLS = str(pools)


def _fail(trial: Trial, nodes: str, why: str = "Slurm job 9 ended FAILED") -> list[str]:
    return nodes_failed_start(
        namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE,
        pool=POOL,
        nodes=nodes,
        why=why,
        trial_id=trial.id,
        run_id=1,
    )


def _node(name: str) -> SlurmNode:
    return SlurmNode.objects.get(pool=POOL, name=name)


def _excluded() -> list[str]:
    return excluded_nodes(namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE, pool=POOL)


def _admin(django_user_model) -> APIClient:
    client = APIClient()
    staff = django_user_model.objects.create_user("root", is_staff=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    return client


def test_the_hostlist_expands_as_slurm_expands_it():
    cases = {
        "node[01-03],gpu7": ["node01", "node02", "node03", "gpu7"],
        "x[8-11]": ["x8", "x9", "x10", "x11"],
        "a[1-2]b[3-4]": ["a1b3", "a1b4", "a2b3", "a2b4"],
        "n[1,3-4],vm": ["n1", "n3", "n4", "vm"],
        "vm": ["vm"],
        "": [],
    }
    for expression, names in cases.items():
        assert expand_hostlist(expression) == names, expression
        assert hostnames(expression) == names, expression  # scontrol's, where installed
    for bad in ("a[1-", "a]", "a[x-2]", "a[3-1]"):
        with pytest.raises(SlurmError, match="not a Slurm hostlist"):
            expand_hostlist(bad)


def test_the_third_failed_start_in_a_row_excludes_every_node_of_the_job(trial, caplog):
    assert _fail(trial, "n[1-2]") == []
    assert _fail(trial, "n[1-2]") == []
    assert _excluded() == []
    with caplog.at_level(logging.ERROR, logger="headway.slurm"):
        assert _fail(trial, "n[1-2]", "Slurm job 12 ended FAILED (NonZeroExitCode)") == [
            "n1",
            "n2",
        ]
    assert _excluded() == ["n1", "n2"]
    node = _node("n1")
    assert node.failed_starts == 3 and node.excluded_at is not None
    assert node.excluded_reason == (
        "excluded automatically: 3 runs in a row were lost on it before their ranks started "
        "(HEADWAY_HOST_MAX_FAILED_STARTS 3); last: Slurm job 12 ended FAILED (NonZeroExitCode)"
    )
    assert "Slurm node n1 of pool hpc: excluded automatically" in caplog.text
    lines = list(TrialLog.objects.filter(trial=trial).values_list("message", flat=True))
    assert any(
        line.startswith("[headway] Slurm node n2 of pool hpc excluded automatically: 3 runs")
        and "headway pool enable-node hpc n2" in line
        for line in lines
    ), lines
    # A fourth loss keeps the first reason and says nothing more.
    assert _fail(trial, "n1", "another cause") == []
    assert "last: Slurm job 12" in _node("n1").excluded_reason


def test_a_run_that_starts_on_a_job_resets_its_nodes_counts(trial):
    _fail(trial, "n[1-2]")
    _fail(trial, "n[1-2]")
    nodes_started(namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE, pool=POOL, nodes="n1")
    assert (_node("n1").failed_starts, _node("n2").failed_starts) == (0, 2)
    assert _fail(trial, "n[1-2]") == ["n2"]


def test_the_lifecycle_resets_the_nodes_of_the_job_a_run_started_on(trial):
    _fail(trial, "n[1-3]")
    job = SlurmJob.objects.create(run=trial.runs.get(), pool=POOL, nodes="n[2-3]")
    host = WorkerHost.objects.create(
        name="slurm-r1-n0",
        pool=POOL,
        namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE,
        queue="",
        made_for_run=job.run,
    )
    host_started_a_run(host.id)  # what trial_run_running calls for the run's host
    counts = dict(SlurmNode.objects.values_list("name", "failed_starts"))
    assert counts == {"n1": 1, "n2": 0, "n3": 0}


def _run_on_a_job(trial: Trial, nodes: str) -> None:
    """Place the trial's queued run on node 0 of a Slurm job on ``nodes``, as submission does."""
    run = trial.runs.get(run_id=Trial.objects.get(id=trial.id).run_id)
    job = SlurmJob.objects.create(run=run, pool=POOL, nodes=nodes)
    run.host = WorkerHost.objects.create(
        name=f"slurm-r{run.pk}-n0",
        pool=POOL,
        namespace=django_settings.CELERY_TASK_DEFAULT_QUEUE,
        queue="",
        made_for_run=job.run,
    )
    run.save(update_fields=["host"])


def test_the_lifecycle_counts_a_run_lost_before_start_on_its_job_s_nodes(trial):
    _run_on_a_job(trial, "n[1-2]")
    lifecycle.trial_run_exited(
        trial_id=trial.id, run_id=1, exit_code=None, reason="Slurm job 5 ended FAILED"
    )
    assert dict(SlurmNode.objects.values_list("name", "failed_starts")) == {"n1": 1, "n2": 1}
    # A killed trial's run that ends before it started is no failure of the node.
    _run_on_a_job(trial, "n3")
    assert lifecycle.trial_run_claim(trial_id=trial.id, run_id=2, worker="slurm-node") is not None
    lifecycle.trial_kill(trial_id=trial.id)
    lifecycle.trial_run_exited(
        trial_id=trial.id, run_id=2, exit_code=None, reason="Slurm job 6 ended CANCELLED"
    )
    assert not SlurmNode.objects.filter(name="n3").exists()
    assert Trial.objects.get(id=trial.id).state == "CANCELED"


def test_zero_never_excludes(trial, settings):
    settings.HEADWAY_HOST_MAX_FAILED_STARTS = 0
    for _ in range(4):
        assert _fail(trial, "n1") == []
    assert _excluded() == [] and _node("n1").failed_starts == 4


def _script(settings: SlurmPoolSettings, exclude: list[str] | None = None) -> str:
    return job_script(
        settings,
        JobLayout(1, 1),
        name="headway-ns-t1-r1",
        python="/opt/hw/bin/python",
        work_dir="/scratch/hw",
        environment={},
        exclude=exclude or [],
    )


def test_the_jobs_script_excludes_the_nodes_with_the_admins_own():
    options = _options(_script(SlurmPoolSettings()))
    assert not any(option.startswith("--exclude") for option in options)
    settings = SlurmPoolSettings(sbatch_options=["--exclude=bad7", "--exclusive"])
    script = _script(settings, exclude=["n1", "n2"])
    excludes = [option for option in _options(script) if option.startswith("--exclude")]
    # One option: sbatch keeps only the last --exclude it is given.
    assert excludes == ["--exclude=bad7,n1,n2"]
    assert "--exclusive" in _options(script)


def test_the_pool_shows_its_excluded_nodes_and_an_admin_enables_one(
    trial, slurm_pool, django_user_model
):
    for _ in range(3):
        _fail(trial, "n[1-2]")
    _fail(trial, "n3")
    user = APIClient()
    user.force_authenticate(django_user_model.objects.create_user("reader"))
    listed = user.get("/api/v1/resource-pools/").json()["results"]
    pools = {pool["name"]: pool for pool in listed}
    shown = pools[POOL]["excluded_nodes"]
    assert [node["name"] for node in shown] == ["n1", "n2"]  # n3 counts 1: not excluded
    assert shown[0]["excluded_reason"].startswith("excluded automatically: 3 runs in a row")
    assert pools["default"]["excluded_nodes"] == []
    url = f"/api/v1/resource-pools/{POOL}/nodes/n1/enable/"
    assert user.post(url).status_code == 403
    admin = _admin(django_user_model)
    answer = admin.post(url)
    assert answer.status_code == 200, answer.content
    assert answer.json() | {"excluded_at": None} == {
        "name": "n1",
        "pool": POOL,
        "failed_starts": 0,
        "excluded_reason": "",
        "excluded_at": None,
    }
    assert _excluded() == ["n2"]
    missing = admin.post(f"/api/v1/resource-pools/{POOL}/nodes/n9/enable/")
    assert missing.status_code == 404 and "n9" in missing.json()["detail"]
    bad = admin.post(f"/api/v1/resource-pools/{POOL}/nodes/n%00x/enable/")
    assert bad.status_code == 400 and "node" in bad.json()["detail"], bad.content
    # A pool whose type has no nodes (agent) says so on its pool field; an unknown pool is 404.
    no_nodes = admin.post("/api/v1/resource-pools/default/nodes/n1/enable/")
    assert no_nodes.status_code == 400 and "pool" in no_nodes.json()["detail"], no_nodes.content
    unknown = admin.post("/api/v1/resource-pools/nowhere/nodes/n1/enable/")
    assert unknown.status_code == 404 and "nowhere" in unknown.json()["detail"]


def test_enabling_a_node_headway_never_counted_is_not_found():
    with pytest.raises(SlurmNodeNotFound, match="no Slurm node n9"):
        node_enable(namespace="x", pool=POOL, name="n9")


def test_an_scontrol_that_cannot_run_leaves_the_expansion_to_the_grammar(tmp_path, monkeypatch):
    # A master whose scontrol finds no slurm.conf: it exits 1 before looking at the expression.
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\necho 'Could not establish a configuration source' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert hostnames("node[01-03],gpu7") == ["node01", "node02", "node03", "gpu7"]
    with pytest.raises(SlurmError, match="not a Slurm hostlist"):
        hostnames("a[3-1]")


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol is not installed")
def test_scontrol_s_own_answer_for_a_malformed_hostlist_is_an_error():
    done = subprocess.run(["scontrol", "show", "hostnames", "vm"], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("scontrol has no Slurm configuration here")
    with pytest.raises(SlurmError, match="could not expand"):
        hostnames("n[01-02,7]-ib")


def test_the_workers_page_shows_the_pool_s_excluded_nodes_with_the_reason(
    trial, slurm_pool, client, django_user_model
):
    from django.urls import reverse

    for _ in range(3):
        _fail(trial, "n7", "Slurm job 31 ended FAILED")
    client.force_login(django_user_model.objects.create_user("viewer"))
    html = client.get(reverse("dashboard:workers")).content.decode()
    row = html.split('id="slurm-node-n7"', 1)[1].split("</tr>", 1)[0]
    assert "excluded automatically: 3 runs in a row" in row
    assert "last: Slurm job 31 ended FAILED" in row
    assert "headway pool enable-node hpc NODE" in html
