"""Placement of runs over several hosts (gangs), and what each host's trial process is told.

As in tests/registry/scheduling/test_scheduler.py everything runs inside the test's transaction: each test calls
``place_queued_runs()`` itself and sees the tasks only through on-commit callbacks.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry import lifecycle, scheduling
from registry.models import RunShare, RunState, Trial, TrialRun, WorkerHost
from registry.scheduling._placement import gang_size
from tests.helpers import TINY_MODEL, register_host, reload, start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def submit(django_user_model):
    owner = django_user_model.objects.create_user("gang-owner")

    def create(slots: int, entrypoint: str = "python train.py") -> Trial:
        config = {
            "entrypoint": entrypoint,
            "searcher": {"name": "single", "metric": "loss", "max_length": 10},
            "resources": {"slots_per_trial": slots},
        }
        experiment = lifecycle.experiment_create(
            owner=owner, config_source=config, model_definition=TINY_MODEL
        )
        return experiment.trials.get()

    return create


def parts(trial: Trial) -> list[tuple[int, str, list[str]]]:
    """(node rank, host, devices) of the trial's current run: the chief first."""
    run = TrialRun.objects.select_related("host").get(trial=trial, run_id=reload(trial).run_id)
    if run.host is None:
        return []
    out = [(0, run.host.name, run.devices)]
    for share in RunShare.objects.filter(run=run).select_related("host"):
        out.append((share.node_rank, share.host.name, share.devices))
    return out


@pytest.mark.parametrize(
    ("slots", "capacities", "nodes"),
    [
        (2, [2, 2], 1),  # fits one host: never spread out
        (4, [2, 2], 2),
        (4, [2, 2, 2, 2], 2),
        (6, [2, 2, 2], 3),
        (4, [3, 3], 2),  # 2 + 2 on hosts of 3
        (4, [3, 1], None),  # 2 + 2 needs two hosts of 2; 4 x 1 needs four hosts
        (3, [2, 2], None),  # 3 splits only into 3 x 1
        (3, [1, 1, 1], 3),
        (8, [2, 2, 2], None),
    ],
)
def test_a_gang_is_the_fewest_hosts_with_equal_shares(slots, capacities, nodes) -> None:
    assert gang_size(slots, capacities) == nodes


def test_four_slots_are_ganged_over_two_hosts_with_a_task_to_each(
    submit, django_capture_on_commit_callbacks
):
    register_host("a", 2)
    register_host("b", 2)
    trial = submit(slots=4)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert scheduling.place_queued_runs() == [(trial.id, 1)]
    assert parts(trial) == [(0, "a", ["cpu0", "cpu1"]), (1, "b", ["cpu0", "cpu1"])]
    sent = [(cb.func.__name__, cb.args) for cb in callbacks if hasattr(cb, "func")]
    queues = {h.name: h.queue for h in WorkerHost.objects.all()}
    assert ("send_run_task", (trial.id, 1, queues["a"])) in sent
    assert ("send_share_task", (trial.id, 1, 1, queues["b"])) in sent
    listed = {h.name: h.slots_in_use for h in scheduling.host_list()}
    assert listed == {"a": 2, "b": 2}
    assert reload(trial).scheduling_message == ""


def test_a_gang_is_all_or_nothing(submit):
    register_host("a", 2)
    register_host("b", 2)
    small = submit(slots=1)
    scheduling.place_queued_runs()
    wide = submit(slots=4)  # only three slots free: nothing is taken for it
    assert scheduling.place_queued_runs() == []
    assert parts(wide) == [] and not RunShare.objects.exists()
    TrialRun.objects.filter(trial=small).update(state=RunState.EXITED)
    assert scheduling.place_queued_runs() == [(wide.id, 1)]
    assert len(parts(wide)) == 2


def test_a_share_holds_its_slots_until_its_run_and_its_processes_end(submit):
    register_host("a", 2)
    register_host("b", 2)
    wide = submit(slots=4)
    scheduling.place_queued_runs()
    run = TrialRun.objects.get(trial=wide)
    share = RunShare.objects.get(run=run)
    RunShare.objects.filter(id=share.id).update(state=RunState.RUNNING)
    TrialRun.objects.filter(id=run.id).update(state=RunState.EXITED)
    after = submit(slots=2)
    assert scheduling.place_queued_runs() == [(after.id, 1)]
    assert parts(after) == [(0, "a", ["cpu0", "cpu1"])]  # b's ranks still run
    RunShare.objects.filter(id=share.id).update(state=RunState.EXITED)
    assert {h.name: h.slots_in_use for h in scheduling.host_list()} == {"a": 2, "b": 0}


def test_a_gang_whose_share_host_is_lost_before_starting_is_placed_again(submit):
    register_host("a", 2)
    register_host("b", 2)
    wide = submit(slots=4)
    scheduling.place_queued_runs()
    WorkerHost.objects.filter(name="b").update(heartbeat_at=timezone.now() - timedelta(hours=1))
    register_host("c", 2)
    scheduling.place_queued_runs()
    first = TrialRun.objects.get(trial=wide, run_id=1)
    assert first.state == RunState.EXITED
    assert {host for _, host, _ in parts(wide)} == {"a", "c"}


def test_without_enough_hosts_a_gang_gets_a_message_and_blocks_nobody(submit):
    register_host("a", 2)
    register_host("b", 1)
    huge = submit(slots=4)
    after = submit(slots=1)
    assert scheduling.place_queued_runs() == [(after.id, 1)]
    message = reload(huge).scheduling_message
    assert message.startswith("needs 4 slots; the largest alive worker host (a) has 2")


@pytest.fixture
def as_host(live_server, monkeypatch):
    """``as_host(name)``: this process is host ``name``'s agent from now on (its host token,
    the live server as its master; ``workers.link.api()`` follows the token)."""
    from tests.helpers import host_token
    from workers.config import settings as agent

    monkeypatch.setattr(agent, "HEADWAY_MASTER_URL", live_server.url)
    keys: dict[str, str] = {}

    def become(name: str) -> None:
        keys.setdefault(name, host_token(name))
        monkeypatch.setattr(agent, "HEADWAY_HOST_TOKEN", keys[name])
        monkeypatch.setattr(agent, "HEADWAY_HOST_NAME", name)

    return become


@pytest.mark.django_db(transaction=True)
def test_each_host_s_process_is_told_its_node_and_the_chief_s_rendezvous(
    submit, as_host, monkeypatch, tmp_path
):
    from headway.launch._network import local_addresses
    from workers import distributed, launch, link
    from workers.config import settings as agent

    # An address of this host: a HEADWAY_HOST_ADDRESS that is not is refused (workers/address.py).
    address = next((a for a in local_addresses() if "." in a and not a.startswith("127.")), "")
    monkeypatch.setattr(agent, "HEADWAY_HOST_ADDRESS", address or "127.0.0.1")
    monkeypatch.setattr(agent, "HEADWAY_THREADS_PER_SLOT", 2)
    register_host("a", 2)
    register_host("b", 2)
    trial = submit(slots=4, entrypoint="model_def:TinyTrial")
    scheduling.place_queued_runs()
    start_run(trial)
    as_host("a")  # the chief's host publishes where to meet
    spec = link.api().run_spec(trial.id, 1)
    chief = distributed.chief_plan(spec)
    assert (chief.nnodes, chief.node_rank, chief.total_slots) == (2, 0, 4)
    as_host("b")  # the other host claims its share (once) and waits for the chief
    assert link.api().share_claim(trial.id, 1, 1, worker="worker-b").claimed
    assert not link.api().share_claim(trial.id, 1, 1, worker="again").claimed
    share = link.api().share_spec(trial.id, 1, 1)
    node = distributed.wait_for_rendezvous(share)
    assert node == distributed.NodePlan(2, 1, 4, agent.HEADWAY_HOST_ADDRESS, chief.port)
    chief_env = launch.environment(spec, "token", tmp_path / "info.json", chief)
    share_env = launch.environment(share, "token", tmp_path / "info.json", node)
    for env, rank in ((chief_env, "0"), (share_env, "1")):
        assert env["HEADWAY_NUM_NODES"] == "2" and env["HEADWAY_NODE_RANK"] == rank
        assert env["HEADWAY_CHIEF_IP"] == agent.HEADWAY_HOST_ADDRESS
        assert env["HEADWAY_RDZV_PORT"] == str(chief.port)
        assert env["HEADWAY_SLOT_IDS"] == "cpu0,cpu1" and env["HEADWAY_THREADS_PER_SLOT"] == "2"
    # A trial class over 4 slots runs under the launcher; a shell command as given.
    assert launch.command("model_def:Trial", True, 4)[2:] == [
        "headway.launch.torch_distributed",
        "--trial",
        "model_def:Trial",
    ]
    assert launch.command("model_def:Trial", True, 1)[2] == "headway.exec.harness"
    assert launch.command("python train.py", False, 4) == ["/bin/sh", "-c", "python train.py"]


@pytest.mark.django_db(transaction=True)
def test_the_chief_sees_a_failed_or_silent_share(submit, as_host):
    from workers import distributed, link

    register_host("a", 2)
    register_host("b", 2)
    trial = submit(slots=4)
    scheduling.place_queued_runs()
    run = start_run(trial)
    as_host("a")  # the chief's host, which sees the master's judgement of its shares
    spec = link.api().run_spec(trial.id, run.run_id)
    watch = distributed.ShareWatch(spec)
    assert watch.check() is None  # queued, within the rendezvous timeout
    share = RunShare.objects.get(run=run)
    RunShare.objects.filter(id=share.id).update(
        state=RunState.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    assert "node 1 (host b) stopped heartbeating" in distributed.ShareWatch(spec).check()
    RunShare.objects.filter(id=share.id).update(state=RunState.EXITED, exit_code=3)
    failed = distributed.ShareWatch(spec)
    assert "node 1 (host b) exited with code 3" in failed.check()
    assert failed.final_exit_code(0, lambda line: None) == 3  # the run failed
