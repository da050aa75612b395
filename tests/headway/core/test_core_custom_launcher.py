"""Custom launchers: ``headway.launch.wrap_rank``, ``ClusterInfo.slot_ids`` /
``container_addrs`` / ``container_rank``, and a ``DistributedContext`` built by hand in processes
the script starts itself (Determined's ``core_api/4_distributed.py``), whose collectives run
over a store rank 0 serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headway._info import ClusterInfo
from tests.helpers import REPO, free_port

WRAP = [sys.executable, "-m", "headway.launch.wrap_rank"]


def child_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE")
        and k not in ("HEADWAY_CLUSTER_INFO", "HEADWAY_RDZV_PORT")
    }
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **extra)
    return env


def test_wrap_rank_prefixes_every_line_and_keeps_the_exit_status() -> None:
    code = (
        "import sys; print('a'); sys.stdout.write('x\\ry\\n'); sys.stdout.flush(); "
        "print('b', file=sys.stderr); sys.exit(5)"
    )
    done = subprocess.run(
        [*WRAP, "3", "--", sys.executable, "-c", code],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5
    assert done.stdout.splitlines() == ["[rank=3] || a", "[rank=3] || x", "[rank=3] || y"]
    assert done.stderr.splitlines() == ["[rank=3] || b"]


def test_wrap_rank_reads_the_rank_from_the_first_variable_set() -> None:
    done = subprocess.run(
        [*WRAP, "--no-redirect-stdio", "NOT_SET,MY_RANK", sys.executable, "-c", "print('hi')"],
        env=child_env(MY_RANK="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "[rank=1] || hi\n")
    missing = subprocess.run(
        [*WRAP, "NOT_SET", "true"], env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and "NOT_SET are not set" in missing.stderr


def test_cluster_info_tells_a_launcher_where_its_ranks_sit(monkeypatch) -> None:
    config = {"entrypoint": "python train.py", "searcher": {"name": "single", "metric": "m"}}
    base = {
        "master_url": "u",
        "token": "t",
        "experiment_id": 1,
        "trial_id": 2,
        "run_id": 1,
        "experiment_config": config,
    }
    monkeypatch.setenv("HEADWAY_SLOT_IDS", "cpu0,cpu1")
    monkeypatch.setenv("HEADWAY_NUM_NODES", "2")
    monkeypatch.setenv("HEADWAY_NODE_RANK", "1")
    monkeypatch.setenv("HEADWAY_CHIEF_IP", "10.0.0.1")
    info = ClusterInfo.from_dict(base)
    assert info.slot_ids == [0, 1]
    assert info.container_addrs == ["10.0.0.1", ""] and info.container_rank == 1
    monkeypatch.setenv("HEADWAY_SLOT_IDS", "2,3,GPU-5f1c")
    monkeypatch.setenv("HEADWAY_NUM_NODES", "1")
    monkeypatch.setenv("HEADWAY_NODE_RANK", "0")
    info = ClusterInfo.from_dict(base)
    assert info.slot_ids == [2, 3, "GPU-5f1c"]
    assert info.container_addrs == ["10.0.0.1"] and info.container_rank == 0


# A launcher written by hand, as Determined's core_api/4_distributed.py: it starts one worker per
# slot under wrap_rank; each worker builds its DistributedContext from its own arguments.
SCRIPT = """
import json, os, subprocess, sys, time
from headway import core

def launcher(port):
    procs = [
        subprocess.Popen([sys.executable, "-m", "headway.launch.wrap_rank", str(rank), "--",
                          sys.executable, __file__, "worker", str(rank), port])
        for rank in range(2)
    ]
    sys.exit(max(p.wait() for p in procs))

def worker(rank, port):
    d = core.DistributedContext(
        rank=rank, size=2, local_rank=rank, local_size=2, cross_rank=0, cross_size=1,
        chief_ip="127.0.0.1", port=int(port) if port != "-" else None,
    )
    out = {
        "allgather": d.allgather(rank * 10),
        "broadcast": d.broadcast({"from": rank}),
        "gather": d.gather(f"r{rank}"),
        "allgather_local": d.allgather_local(rank),
        "broadcast_local": d.broadcast_local(f"local{rank}"),
        "gather_local": d.gather_local(rank),
        "again": [d.allgather(i) for i in range(3)],
    }
    if "HEADWAY_CLUSTER_INFO" not in os.environ:  # no registry here: local mode only
        with core.init(distributed=d, checkpoint_storage="store", max_length=2) as ctx:
            out["preempt"] = ctx.preempt.should_preempt()
            out["lengths"] = []
            for op in ctx.searcher.operations():
                out["lengths"].append(op.length)
                if rank == 0:
                    op.report_completed(1.0)
    if rank == 1:
        time.sleep(0.5)  # the chief is done first: it must keep serving until rank 1 left
    out["last"] = d.broadcast(f"bye from {rank}")
    print(json.dumps(out), flush=True)

if sys.argv[1] == "launcher":
    launcher(sys.argv[2])
else:
    worker(int(sys.argv[2]), sys.argv[3])
"""


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["tcp", "file"])
def test_a_hand_built_context_runs_collectives_in_processes_the_script_started(
    tmp_path: Path, transport: str
) -> None:
    (tmp_path / "four.py").write_text(textwrap.dedent(SCRIPT))
    if transport == "tcp":
        port, env = str(free_port()), child_env()
    else:
        # On the cluster with one host and no port: a FileStore in the run's directory, the
        # folder of $HEADWAY_CLUSTER_INFO (the file itself is not read by the collectives).
        (tmp_path / "run").mkdir()
        port, env = "-", child_env(HEADWAY_CLUSTER_INFO=str(tmp_path / "run" / "info.json"))
    done = subprocess.run(
        [sys.executable, "four.py", "launcher", port],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = {}
    for line in done.stdout.splitlines():
        head, _, body = line.partition("] || ")
        if body.startswith("{"):
            results[int(head.removeprefix("[rank="))] = json.loads(body)
    assert sorted(results) == [0, 1], done.stdout + done.stderr
    r0, r1 = results[0], results[1]
    assert r0["allgather"] == r1["allgather"] == [0, 10]
    assert r0["broadcast"] == r1["broadcast"] == {"from": 0}
    assert r0["gather"] == ["r0", "r1"] and r1["gather"] is None
    assert r0["allgather_local"] == r1["allgather_local"] == [0, 1]
    assert r0["broadcast_local"] == r1["broadcast_local"] == "local0"
    assert r0["gather_local"] == [0, 1] and r1["gather_local"] is None
    assert r0["again"] == r1["again"] == [[0, 0], [1, 1], [2, 2]]
    if transport == "tcp":
        assert r0["preempt"] is r1["preempt"] is False
        assert r0["lengths"] == r1["lengths"] == [2]
    assert r0["last"] == r1["last"] == "bye from 0"
