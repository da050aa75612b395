"""TorchTrainer on a real Ray cluster (docs/torch-trainer.md "On a Ray cluster"): a head and two
worker nodes, each in its own network namespace on its own address (``ray_cluster``).

The driver (ray_driver.py) runs on the head and holds the head's CPUs, so its two workers (2 CPUs
each) land one on each worker node; they train on generated data. A worker node is then killed in
the middle of the third epoch: the trainer restores the state after epoch 2 on what still fits
(one worker), runs the epoch again and finishes.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import log_tail, wait_for_or_false
from tests.netns_network import namespace_pids

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DRIVER = Path(__file__).with_name("ray_driver.py")
EVENT_TIMEOUT = 240  # seconds for the driver's next line (worker start-up on a loaded machine)


class Events:
    """The driver's JSON stdout lines, read by a thread; ``next()`` waits for the next one."""

    def __init__(self, proc: subprocess.Popen, stderr: Path) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = stderr
        self.times: list[tuple[str, float]] = []  # (event, seconds since the driver started)
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                self._lines.put(line)
        self._lines.put(None)

    def next(self) -> dict:
        try:
            line = self._lines.get(timeout=EVENT_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None:
            pytest.fail(f"the driver stopped answering:\n{log_tail(self._stderr, 60)}")
        event = json.loads(line)
        self.times.append((next(iter(event)), event.pop("t")))
        return event


def actor_processes(cluster) -> list[int]:
    """TorchTrainer worker actors still running on any node (Ray titles them ``ray::_WorkerActor``)."""
    found = []
    for node in cluster.nodes:
        for pid in namespace_pids(node.netns):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"_WorkerActor" in cmdline:
                found.append(pid)
    return found


def test_two_workers_on_two_nodes_train_then_survive_a_lost_node(ray_cluster, tmp_path):
    stderr = tmp_path / "driver.err"
    with open(stderr, "w") as err:
        proc = ray_cluster.start_in(
            ray_cluster.head,
            [sys.executable, str(DRIVER), "--epochs", "5", "--hold-dir", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    events = Events(proc, stderr)
    started = events.next()
    assert started["driver"] == ray_cluster.head.ip
    assert sorted(started["workers"]) == sorted(node.ip for node in ray_cluster.workers)
    first, second = events.next(), events.next()
    assert (first["epoch"], second["epoch"]) == (1, 2)
    assert first["workers"] == second["workers"] == 2
    assert second["train_loss"] < first["train_loss"]

    # The nodes share this machine's disk: rank 0 marks that it holds the third epoch.
    held = tmp_path / "held"
    assert wait_for_or_false(held.exists, EVENT_TIMEOUT), log_tail(stderr, 60)
    ray_cluster.kill_node(ray_cluster.workers[1].name)
    (tmp_path / "go").touch()
    after = [events.next() for _ in range(3)]
    assert [e["epoch"] for e in after] == [3, 4, 5]  # epoch 3 again, from epoch 2's state
    assert all(e["workers"] == 1 for e in after)
    assert after[-1]["failures"] == 1
    # Restored weights, not fresh ones: the loss goes on from where epoch 2 left it.
    assert after[0]["train_loss"] < first["train_loss"]
    assert after[-1]["train_loss"] < second["train_loss"]
    final = events.next()
    assert final["workers"] == [ray_cluster.workers[0].ip]
    assert final["validation"]["val_accuracy"] > 0.8
    assert events.next() == {"done": True}
    assert proc.wait(timeout=60) == 0
    print("driver timeline (s):", events.times)  # shown with -s: where the time goes
    # shutdown() killed the actors; their processes exit once Ray delivers the kill.
    assert wait_for_or_false(lambda: not actor_processes(ray_cluster), 30), actor_processes(
        ray_cluster
    )
