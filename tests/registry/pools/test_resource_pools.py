"""Resource pools: the admin's file, ``resources.resource_pool`` at
submission, ``GET /api/v1/resource-pools/`` against real placements, and the Workers page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from headway.expconf import ConfigError, parse_experiment_config
from registry import scheduling
from registry.models import TrialRun, WorkerHost
from registry.pools import load_resource_pools
from registry.pools.slurm.settings import slurm_settings
from registry.scheduling import pool_summaries
from tests.helpers import REPO, TINY_CONFIG, create_experiment, register_host, start_run

POOLS = """
- name: big
  type: agent
  description: 8-GPU hosts
- name: default
  type: agent
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str) -> str:
    path = _file(tmp_path, text)
    with pytest.raises(ImproperlyConfigured) as caught:
        load_resource_pools(path)
    message = str(caught.value)
    assert message.startswith(f"HEADWAY_RESOURCE_POOLS: {path}")
    return message


def test_the_file_lists_pools_in_its_order(tmp_path):
    pools = load_resource_pools(_file(tmp_path, POOLS))
    assert pools.names() == ["big", "default"]
    assert (pools.pools["big"].type, pools.pools["big"].description) == ("agent", "8-GPU hosts")


def test_default_is_added_when_the_file_leaves_it_out(tmp_path):
    pools = load_resource_pools(_file(tmp_path, "- {name: big, type: agent}\n"))
    assert pools.names() == ["default", "big"]
    assert pools.pools["default"].type == "agent"


def test_a_slurm_pool_carries_its_job_settings_and_an_agent_pool_none(tmp_path):
    text = POOLS + (
        "- name: hpc\n  type: slurm\n  partition: debug\n  gres_per_slot: gpu:1\n"
        "  time_limit: '1-00:00'\n  slots_per_node: 4\n  sbatch_options: [--exclusive]\n"
    )
    pools = load_resource_pools(_file(tmp_path, text))
    hpc = pools.pools["hpc"]
    assert hpc.hosts_per_run and not pools.pools["big"].hosts_per_run
    assert [pool.name for pool in pools.of_type("slurm")] == ["hpc"]
    assert pools.pools["big"].settings is None
    hpc_settings = slurm_settings(hpc)
    assert (hpc_settings.partition, hpc_settings.gres_per_slot, hpc_settings.time_limit) == (
        "debug",
        "gpu:1",
        "1-00:00",
    )
    assert hpc_settings.sbatch_options == ["--exclusive"]
    assert hpc_settings.preempt_grace_seconds == 120  # the default
    # slots_per_trial onto nodes: one node up to slots_per_node, whole nodes past it.
    assert [hpc_settings.nodes_for(n) for n in (1, 4, 8, 6)] == [(1, 1), (1, 4), (2, 4), None]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("- {name: a, type: agent, partition: x}\n", "entry 1 (name 'a'), field partition"),
        ("- {type: agent}\n", "entry 1, field name"),
        ("- {name: a}\n", "entry 1 (name 'a'), field type"),
        ("- {name: a, type: kubernetes}\n", "entry 1 (name 'a'), field type"),
        ("- {name: a, type: slurm, time_limit: soon}\n", "entry 1 (name 'a'), field time_limit"),
        (
            "- {name: a, type: slurm, gres_per_slot: gpu}\n",
            "entry 1 (name 'a'), field gres_per_slot",
        ),
        ("- {name: a, type: slurm, partition: 'x;y'}\n", "entry 1 (name 'a'), field partition"),
        (
            "- {name: a, type: slurm, slots_per_node: 0}\n",
            "entry 1 (name 'a'), field slots_per_node",
        ),
        ("- {name: a, type: slurm, python: bin/python}\n", "entry 1 (name 'a'), field python"),
        ("- {name: a, type: slurm, queue: x}\n", "entry 1 (name 'a'), field queue"),
        ("- {name: 'a b', type: agent}\n", "entry 1 (name 'a b'), field name"),
        ("- {name: a, type: agent}\n- {name: a, type: agent}\n", "entry 2 (name 'a'), field name"),
    ],
)
def test_a_bad_entry_names_the_file_entry_and_field(tmp_path, text, where):
    assert where in _error(tmp_path, text)


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("--time=10", "use time_limit"),
        ("-p", "use partition"),
        ("--gres=gpu:2", "use gres_per_slot"),
        ("--export=ALL", "set by Headway"),
        ("--uid=alice", "the job runs as the master's account"),
        ("exclusive", "is not an sbatch option"),
    ],
)
def test_sbatch_options_may_not_contradict_what_headway_sets(tmp_path, option, hint):
    message = _error(tmp_path, f"- {{name: a, type: slurm, sbatch_options: ['{option}']}}\n")
    assert "entry 1 (name 'a'), field sbatch_options" in message
    assert hint in message


def test_a_file_that_is_not_a_list_or_not_yaml_is_refused(tmp_path):
    assert "must be a list of pools" in _error(tmp_path, "big: {type: agent}\n")
    assert "is not YAML" in _error(tmp_path, "- [unclosed\n")
    with pytest.raises(ImproperlyConfigured, match="cannot read"):
        load_resource_pools(tmp_path / "missing.yaml")


def test_a_bad_file_stops_the_server_at_start_up(tmp_path):
    path = _file(tmp_path, "- {name: hpc, type: slurm, time_limit: soon}\n")
    env = dict(os.environ, HEADWAY_RESOURCE_POOLS=str(path), SECRET_KEY="x")
    env.pop("DATABASE_URL", None)
    env["HEADWAY_VAR_DIR"] = str(tmp_path / "var")
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"HEADWAY_RESOURCE_POOLS: {path}: entry 1 (name 'hpc'), field time_limit" in done.stderr
    assert "'soon' is not a Slurm time" in done.stderr


def test_the_config_carries_the_pool_name_default_default():
    base = {"entrypoint": "m:T", "searcher": {"name": "single", "metric": "m", "max_length": 1}}
    assert parse_experiment_config(base).resources.resource_pool == "default"
    chosen = parse_experiment_config({**base, "resources": {"resource_pool": "big"}})
    assert chosen.resources.resource_pool == "big"
    with pytest.raises(ConfigError, match=r"resources\.resource_pool"):
        parse_experiment_config({**base, "resources": {"resource_pool": "../x"}})


@pytest.fixture
def pools(settings, tmp_path):
    """The pools ``big`` and ``default`` (the admin's file of this test)."""
    settings.HEADWAY_RESOURCE_POOLS = str(_file(tmp_path, POOLS))
    return settings.HEADWAY_RESOURCE_POOLS


def _config(pool: str, slots: int = 1) -> str:
    return TINY_CONFIG + f"resources: {{resource_pool: {pool}, slots_per_trial: {slots}}}\n"


@pytest.mark.django_db
def test_an_unknown_pool_is_a_400_naming_the_field_and_the_pools(api, pools):
    response = create_experiment(api, _config("huge"))
    assert response.status_code == 400
    body = response.json()
    text = str(body)
    assert "config.resources.resource_pool" in text
    assert "'huge'" in text and "big, default" in text
    assert not TrialRun.objects.exists()


@pytest.mark.django_db
def test_a_run_belongs_to_its_experiment_s_pool_and_runs_only_on_its_hosts(api, pools):
    register_host("small-a", 4)
    register_host("big-a", 4, pool="big")
    response = create_experiment(api, _config("big"))
    assert response.status_code == 201, response.content
    run = TrialRun.objects.get(trial__experiment_id=response.json()["id"])
    assert run.pool == "big"
    scheduling.place_queued_runs()
    run.refresh_from_db()
    assert run.host is not None and run.host.name == "big-a"


@pytest.mark.django_db
def test_rest_counts_match_the_placed_runs(api, pools, settings):
    register_host("big-a", 2, pool="big")
    register_host("big-b", 4, pool="big")
    register_host("lost-c", 8, pool="big")
    scheduling.host_stopped(name="lost-c")  # not alive: neither its host nor its slots count
    register_host("small-a", 1)
    experiments = [create_experiment(api, _config("big", 2)).json()["id"] for _ in range(4)]
    experiments.append(create_experiment(api, _config("default")).json()["id"])
    scheduling.place_queued_runs()
    runs = TrialRun.objects.filter(trial__experiment_id__in=experiments)
    start_run(runs.filter(host__isnull=False).first().trial)
    # Another registry's namespace sharing this database: none of its hosts or runs count.
    settings.CELERY_TASK_DEFAULT_QUEUE = "another-registry"
    register_host("other-a", 16, pool="big")
    settings.CELERY_TASK_DEFAULT_QUEUE = runs.first().namespace

    response = api.get("/api/v1/resource-pools/")
    assert response.status_code == 200
    answer = {pool["name"]: pool for pool in response.json()["results"]}
    assert list(answer) == ["big", "default"]
    for name, pool in answer.items():
        hosts = WorkerHost.objects.filter(pool=name, namespace=runs.first().namespace).alive()
        mine = runs.filter(pool=name)
        placed = mine.filter(host__in=hosts).exclude(state="EXITED")
        assert pool["hosts"] == hosts.count()
        assert pool["slots"] == sum(h.slots for h in hosts)
        assert pool["slots_in_use"] == sum(r.slots for r in placed)
        assert pool["queued_runs"] == mine.filter(state="QUEUED", host__isnull=True).count()
        assert pool["type"] == "agent" and pool["configured"] is True
    # What the scenario makes: 2 alive big hosts (6 slots) hold 2-slot runs, the rest waits.
    assert (answer["big"]["hosts"], answer["big"]["slots"]) == (2, 6)
    assert answer["big"]["slots_in_use"] == 6 and answer["big"]["queued_runs"] == 1
    assert answer["big"]["description"] == "8-GPU hosts"
    assert (answer["default"]["slots_in_use"], answer["default"]["queued_runs"]) == (1, 0)


@pytest.mark.django_db
def test_a_pool_that_only_hosts_still_name_is_listed_as_not_configured(api, pools, settings):
    register_host("old-a", 2, pool="retired")
    names = [(p.name, p.configured, p.hosts) for p in pool_summaries()]
    assert names == [("big", True, 0), ("default", True, 0), ("retired", False, 1)]


@pytest.mark.django_db
def test_the_pools_route_needs_credentials(client):
    assert client.get("/api/v1/resource-pools/").status_code in (401, 403)


@pytest.mark.django_db
def test_the_schema_documents_the_route(api):
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/resource-pools/"]["get"]
    assert "200" in operation["responses"]
    component = schema["components"]["schemas"]["ResourcePool"]["properties"]
    assert {"name", "type", "hosts", "slots", "slots_in_use", "queued_runs"} <= set(component)


@pytest.mark.django_db
def test_the_workers_page_groups_hosts_by_pool(client, user, api, pools):
    register_host("big-a", 2, pool="big")
    register_host("small-a", 1)
    register_host("small-b", 1)
    create_experiment(api, _config("big", 2))
    create_experiment(api, _config("big", 2))
    scheduling.place_queued_runs()
    client.force_login(user)
    html = client.get(reverse("dashboard:workers")).content.decode()
    big = html[html.index('id="pool-big"') : html.index('id="pool-default"')]
    default = html[html.index('id="pool-default"') :]
    assert 'id="host-big-a"' in big and 'id="host-small-a"' not in big
    assert 'id="host-small-a"' in default and 'id="host-small-b"' in default
    assert "1 alive host," in big and "2 / 2 slots in use" in big and "1 queued run" in big
    assert "8-GPU hosts" in big
    assert "2 alive hosts," in default and "0 / 2 slots in use" in default
    assert html.index('id="pool-big"') < html.index('id="pool-default"')  # the file's order


@pytest.mark.django_db
def test_the_workers_page_shows_an_empty_pool(client_alice, pools):
    html = client_alice.get(reverse("dashboard:workers")).content.decode()
    assert 'id="pool-big"' in html and "HEADWAY_RESOURCE_POOL=big python manage.py worker" in html
