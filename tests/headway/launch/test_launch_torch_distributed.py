"""``python -m headway.launch.torch_distributed``: its command line, and real ranks on this CPU.

The unit tests check what the launcher hands torchrun; the others start it as a worker would
(``HEADWAY_SLOT_IDS`` for two slots) and look at what each rank saw. Ranks use gloo.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headway.launch import torch_distributed as launch
from tests.helpers import REPO, process_alive

# -- the command line -----------------------------------------------------------------------------


def test_a_script_and_overrides_are_split_on_the_double_dash() -> None:
    assert launch.parse_args(["python", "train.py", "--epochs", "5"]) == (
        [],
        ["python", "train.py", "--epochs", "5"],
    )
    assert launch.parse_args(["--nproc-per-node", "3", "--", "python", "t.py"]) == (
        ["--nproc-per-node", "3"],
        ["python", "t.py"],
    )


def test_a_trial_class_runs_under_the_harness() -> None:
    overrides, script = launch.parse_args(["--trial", "model_def:DigitsTrial"])
    assert overrides == []
    assert script == [sys.executable, "-m", "headway.exec.harness", "model_def:DigitsTrial"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trial", "m:C", "python", "x.py"], "extra arguments after --trial m:C"),
        ([], "no command to launch"),
    ],
)
def test_bad_command_lines_are_rejected(argv: list[str], message: str) -> None:
    with pytest.raises(launch.LaunchError, match=message):
        launch.parse_args(argv)


def test_one_host_uses_a_standalone_rendezvous_with_one_process_per_slot() -> None:
    plan = launch.plan_from_env({"HEADWAY_SLOT_IDS": "cpu0,cpu1"})
    assert plan == launch.LaunchPlan(nproc_per_node=2)
    cmd = launch.torchrun_command(plan, ["python", "train.py"], ["--monitor-interval", "1"])
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--max-restarts") + 1] == "0"
    assert "--standalone" in cmd and "--nnodes" not in cmd
    # Overrides come after ours (torchrun keeps the last value), the script last.
    assert cmd.index("--monitor-interval") > cmd.index("--standalone")
    # Each rank under wrap_rank (Determined's layout), whose prefix comes from RANK.
    assert cmd[-8:] == [
        "--no-python", sys.executable, "-m", "headway.launch.wrap_rank", "RANK", "--",
        sys.executable, "train.py",
    ]  # fmt: skip
    assert "--tee" not in cmd


def test_several_hosts_meet_at_the_chief_with_a_static_rendezvous() -> None:
    env = {
        "HEADWAY_SLOT_IDS": "0,1",
        "HEADWAY_NUM_NODES": "2",
        "HEADWAY_NODE_RANK": "1",
        "HEADWAY_CHIEF_IP": "10.0.0.5",
        "HEADWAY_RDZV_PORT": "29400",
        "HEADWAY_THREADS_PER_SLOT": "3",
    }
    plan = launch.plan_from_env(env)
    assert plan == launch.LaunchPlan(2, 2, 1, "10.0.0.5", 29400, 3)
    cmd = launch.torchrun_command(plan, ["./run.sh"])
    flags = dict(zip(cmd[3:-2:2], cmd[4:-2:2], strict=False))
    assert flags["--nnodes"] == "2" and flags["--node-rank"] == "1"
    assert flags["--master-addr"] == "10.0.0.5" and flags["--master-port"] == "29400"
    assert "--standalone" not in cmd and cmd[-1] == "./run.sh"
    child = launch.child_environment(plan, {"OMP_NUM_THREADS": "6"})
    assert child["OMP_NUM_THREADS"] == "3" and child["HEADWAY_CHIEF_IP"] == "10.0.0.5"
    assert "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE" not in child


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HEADWAY_NUM_NODES": "2"}, r"\$HEADWAY_RDZV_PORT is not set"),
        ({"HEADWAY_NUM_NODES": "x"}, r"\$HEADWAY_NUM_NODES='x' is not an integer"),
        ({"HEADWAY_NUM_NODES": "2", "HEADWAY_NODE_RANK": "2"}, "must be < "),
        ({"HEADWAY_NUM_NODES": "0"}, "must be >= 1"),
    ],
)
def test_a_bad_environment_is_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(launch.LaunchError, match=message):
        launch.plan_from_env(env)


# -- real ranks -----------------------------------------------------------------------------------

SEEN = """
import json, os
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "HEADWAY_CHIEF_IP", "OMP_NUM_THREADS"]
print(json.dumps({k: os.environ.get(k) for k in keys}), flush=True)
"""

# Collectives of the Core API's DistributedContext, without init_process_group (Determined's
# work over their own transport); then the same after init_process_group on a fresh context.
COLLECTIVES = """
import json
import torch.distributed as dist
from headway import core

def exercise(d):
    out = {
        "allgather": d.allgather(d.rank * 10),
        "broadcast": d.broadcast({"from": d.rank}),
        "gather": d.gather(d.rank),
        "allgather_local": d.allgather_local(d.local_rank),
        "broadcast_local": d.broadcast_local(d.rank),
        "gather_local": d.gather_local(d.rank),
    }
    for i in range(50):  # many calls in a row stay in step (sequence numbers, cleanup)
        assert d.broadcast(i if d.rank == 0 else None) == i
        assert d.allgather(i) == [i] * d.size
    d.barrier()
    return out

d = core.DistributedContext.from_torch_distributed()
before = exercise(d)
dist.init_process_group("gloo")
after = exercise(core.DistributedContext.from_torch_distributed())
print(json.dumps({"rank": d.rank, "before": before, "after": after}), flush=True)
# Tear down in order, as a script should: gloo's threads are otherwise killed at interpreter exit
# ("terminate called without an active exception", an exit code of -6 now and then).
d.close()
dist.destroy_process_group()
"""

# What the registry reads back from a trial's log: one JSON object per line. Written as print
# does unbuffered (the text, then the newline), with a pause between that torchrun's --tee (which
# polls each rank's file every 0.1 s) would have seen as the end of a line.
TWO_WRITES = """
import json, os, sys, time
for i in range(3):
    sys.stdout.write(json.dumps({"rank": int(os.environ["RANK"]), "i": i}))
    sys.stdout.flush()
    time.sleep(0.3)
    sys.stdout.write("\\n")
    sys.stdout.flush()
"""

# Rank 1 dies once rank 0 has written its pid; rank 0 would sleep for a long time.
DIES = """
import os, sys, time
if os.environ["RANK"] == "1":
    deadline = time.monotonic() + 60
    while not os.path.exists("rank0.pid") and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(7)
with open("rank0.pid", "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(300)
"""


def launch_script(tmp_path: Path, script: str, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "script.py").write_text(textwrap.dedent(script))
    environ = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    environ.update({"HEADWAY_SLOT_IDS": "cpu0,cpu1", "PYTHONPATH": str(REPO)}, **env)
    return subprocess.run(
        [sys.executable, "-m", "headway.launch.torch_distributed", "python", "script.py"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def rank_lines(output: str) -> dict[int, list[str]]:
    lines: dict[int, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("[rank="):
            head, _, body = line.partition("] || ")
            lines.setdefault(int(head.removeprefix("[rank=")), []).append(body)
    return lines


@pytest.mark.slow
def test_two_slots_start_two_ranks_with_torchrun_s_environment(tmp_path: Path) -> None:
    done = launch_script(tmp_path, SEEN, HEADWAY_THREADS_PER_SLOT="1")
    assert done.returncode == 0, done.stderr
    lines = rank_lines(done.stdout)
    assert sorted(lines) == [0, 1]
    for rank, (body,) in lines.items():
        seen = json.loads(body)
        assert seen["RANK"] == seen["LOCAL_RANK"] == str(rank)
        assert seen["WORLD_SIZE"] == seen["LOCAL_WORLD_SIZE"] == "2"
        assert seen["GROUP_RANK"] == "0" and seen["OMP_NUM_THREADS"] == "1"
        assert seen["HEADWAY_CHIEF_IP"] == "127.0.0.1"


@pytest.mark.slow
def test_collectives_work_before_and_after_init_process_group(tmp_path: Path) -> None:
    done = launch_script(tmp_path, COLLECTIVES)
    assert done.returncode == 0, done.stdout + done.stderr
    results = {rank: json.loads(body[-1]) for rank, body in rank_lines(done.stdout).items()}
    for rank, result in results.items():
        for phase in ("before", "after"):
            got = result[phase]
            assert got["allgather"] == [0, 10] and got["allgather_local"] == [0, 1]
            assert got["broadcast"] == {"from": 0} and got["broadcast_local"] == 0
            assert got["gather"] == ([0, 1] if rank == 0 else None)
            assert got["gather_local"] == ([0, 1] if rank == 0 else None)


@pytest.mark.slow
def test_a_rank_that_dies_stops_the_others_and_fails_the_launch(tmp_path: Path) -> None:
    done = launch_script(tmp_path, DIES, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="5")
    assert done.returncode != 0  # within the 120 s timeout: rank 0 did not sleep its 300 s
    rank0 = int((tmp_path / "rank0.pid").read_text())
    assert not process_alive(rank0)  # no orphan rank


@pytest.mark.slow
def test_a_line_written_in_two_calls_comes_out_whole_with_one_prefix(tmp_path: Path) -> None:
    done = launch_script(tmp_path, TWO_WRITES)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("[rank=")]
    assert sorted(lines) == sorted(
        f'[rank={rank}] || {{"rank": {rank}, "i": {i}}}' for rank in (0, 1) for i in range(3)
    )
