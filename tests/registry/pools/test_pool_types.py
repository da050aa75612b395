"""Pool types are found without naming them (registry.pools.discovery): each folder's provider,
its settings checked by the pools file's parser, its poll in the beat schedule."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from registry.pools import (
    HostOrigin,
    NoNodes,
    add_poll_entries,
    load_resource_pools,
    poll_pools,
    poll_schedule,
    pool_provider,
    pool_providers,
)


def test_every_folder_is_a_type_with_its_provider_agent_first():
    providers = pool_providers()
    assert next(iter(providers)) == "agent"
    assert {"agent", "ray", "slurm"} <= set(providers)
    for name, provider in providers.items():
        assert provider.type == name
    assert pool_provider("agent").host_origin is HostOrigin.AGENT
    assert pool_provider("slurm").host_origin is HostOrigin.PER_RUN
    assert pool_provider("ray").host_origin is HostOrigin.PER_RUN


def test_a_setting_of_another_type_says_which_type_takes_it_and_an_unknown_one_is_refused(
    tmp_path,
):
    path = tmp_path / "pools.yaml"
    path.write_text("- {name: a, type: agent, partition: x}\n")
    with pytest.raises(ImproperlyConfigured, match="only a pool of type slurm takes this setting"):
        load_resource_pools(path)
    path.write_text("- {name: a, type: agent, colour: blue}\n")
    with pytest.raises(ImproperlyConfigured, match="field colour: Extra inputs are not permitted"):
        load_resource_pools(path)
    path.write_text("- {name: a, type: kubernetes}\n")
    with pytest.raises(ImproperlyConfigured, match="the types: agent, ray, slurm"):
        load_resource_pools(path)


def test_each_polling_type_gets_a_beat_entry_at_its_own_interval(monkeypatch, settings):
    # Django loaded the registry: the master's schedule has the slurm type's entry.
    assert settings.CELERY_BEAT_SCHEDULE["pool-poll-slurm"]["task"] == "headway.pool_poll"
    assert not any("slurm-pools" in name for name in settings.CELERY_BEAT_SCHEDULE)
    monkeypatch.setenv("HEADWAY_SLURM_POLL_SECONDS", "7.5")
    monkeypatch.setenv("HEADWAY_RAY_POLL_SECONDS", "3")
    assert poll_schedule() == {"ray": 3.0, "slurm": 7.5}
    schedule: dict[str, dict[str, object]] = {}
    add_poll_entries(schedule, "q")
    assert schedule == {
        "pool-poll-ray": {
            "task": "headway.pool_poll",
            "schedule": 3.0,
            "args": ("ray",),
            "options": {"queue": "q", "expires": 60},
        },
        "pool-poll-slurm": {
            "task": "headway.pool_poll",
            "schedule": 7.5,
            "args": ("slurm",),
            "options": {"queue": "q", "expires": 60},
        },
    }


@pytest.mark.parametrize("variable", ["HEADWAY_SLURM_POLL_SECONDS", "HEADWAY_RAY_POLL_SECONDS"])
@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_poll_interval_that_is_not_a_positive_number_is_refused_naming_it(
    monkeypatch, variable, value
):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ImproperlyConfigured, match=variable):
        poll_schedule()


@pytest.mark.django_db
def test_a_poll_without_a_pool_of_the_type_does_nothing():
    def never(**kwargs):
        raise AssertionError("no run to report")

    assert poll_pools("slurm", "ns", run_exited=never) == []
    assert poll_pools("ray", "ns", run_exited=never) == []
    assert poll_pools("agent", "ns", run_exited=never) == []


def test_a_type_without_nodes_refuses_to_enable_one():
    with pytest.raises(NoNodes, match="pool 'default' is of type agent"):
        pool_provider("agent").node_enable("ns", "default", "n1")
    with pytest.raises(NoNodes, match="pool r is of type ray"):
        pool_provider("ray").node_enable("ns", "r", "n1")


def test_general_code_never_names_a_pool_type_only_its_folder_does():
    import re

    from tests.helpers import REPO

    general = ["registry", "config", "dashboard", "templates", "static", "webhooks", "accounts"]
    suffixes = {".py", ".html", ".js", ".css"}
    for name in set(pool_providers()) - {"agent"}:
        word = re.compile(rf"\b{name}\b", re.IGNORECASE)
        named = [
            str(path.relative_to(REPO))
            for top in general
            for path in (REPO / top).rglob("*")
            if path.suffix in suffixes
            and not path.is_relative_to(REPO / "registry" / "pools" / name)
            and not path.is_relative_to(REPO / "registry" / "migrations")
            and word.search(path.read_text(errors="replace"))
        ]
        assert not named, f"{name} is named outside registry/pools/{name}/: {named}"
