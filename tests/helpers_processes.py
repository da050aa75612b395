"""Test helpers that start and watch processes: free ports, host agents and the master's
worker as subprocesses, host tokens, torch ranks, and ``/proc`` checks. ``tests.helpers``
re-exports every name, so test modules keep importing from there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid as uuid_module
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port unused on every local address (the OS picks it on the wildcard address).

    Checking only 127.0.0.1 could hand out a port some server already listens on at another
    address (a netns cluster's moto S3 on its bridge address), and a server later given that
    port on that address would fail to bind while clients reached the other one."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def is_rank_wrapper(pid: int) -> bool:
    """Whether ``pid`` runs ``headway.launch.wrap_rank`` (the launcher puts one in front of each
    rank: it shares the rank's environment, so only its command line tells them apart)."""
    try:
        return b"headway.launch.wrap_rank" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def run_ranks(code: str, *args: str, world_size: int = 2, timeout: float = 180) -> list[dict]:
    """Run ``python -c code *args`` as ``world_size`` local ranks with torchrun's env vars set
    (gloo rendezvous on a free port, one thread each) and return each rank's ``RESULT{json}``
    line, in rank order. Asserts every rank exits 0 (its stderr is the message)."""
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world_size),
            "GROUP_RANK": "0",
            "PYTHONPATH": str(REPO),
            "OMP_NUM_THREADS": "1",
        }
        env.pop("HEADWAY_CLUSTER_INFO", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code, *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr
        line = next(x for x in stdout.splitlines() if x.startswith("RESULT"))
        results.append(json.loads(line[len("RESULT") :]))
    return results


def run_python(args: list[str], env: dict[str, str], timeout: float = 120):
    """``python ARGS`` from the repository with ``env``, output captured as text (not checked):
    ``run_python(["-m", "workers"], env)`` is a host agent's start."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spawn_python(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """``python ARGS`` from the repository with ``env`` in a session of its own, output
    appended to ``log_path`` (``spawn_python(["-m", "workers"], env, log)``: a host agent)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def new_host_key() -> str:
    """A fresh host key (``hwh_...``), not yet stored."""
    from registry.models.host_token import HOST_KEY_PREFIX

    return HOST_KEY_PREFIX + uuid_module.uuid4().hex


def host_token(name: str, key: str | None = None) -> str:
    """A live host token for host ``name``; with ``key``, that key (created again after a
    transactional test's flush deleted it). Returns the key."""
    from registry.models import HostToken
    from registry.models.host_token import hash_host_key

    key = key or new_host_key()
    token, _ = HostToken.objects.get_or_create(key_hash=hash_host_key(key), defaults={"name": name})
    if token.revoked_at is not None:  # revoked by an earlier test: live again
        HostToken.objects.filter(pk=token.pk).update(revoked_at=None)
    return key


def start_host_workers(
    env: dict[str, str], base: Path, pool: str, slots: int, **extra_env: str
) -> list[subprocess.Popen]:
    """Start the master worker of namespace ``pool`` (its reaper) and two host agents as hosts
    ``<pool>-a`` and ``<pool>-b`` in it, ``slots`` each, with ``env`` (a cluster's) plus
    ``extra_env``; logs in ``base/<host>.log`` and ``base/master.log``."""
    workers = [start_master_worker(dict(env, **extra_env), base / "master.log", pool)]
    for suffix in ("a", "b"):
        name = f"{pool}-{suffix}"
        host_env = dict(
            env,
            HEADWAY_QUEUE=pool,
            HEADWAY_HOST_NAME=name,
            HEADWAY_SLOTS=str(slots),
            HEADWAY_VAR_DIR=str(base / name),
            **extra_env,
        )
        workers.append(start_worker(host_env, base / f"{name}.log", pool, name, slots + 1))
    return workers


def start_master_worker(env: dict[str, str], log_path: Path, namespace: str) -> subprocess.Popen:
    """Start the master's Celery worker of ``namespace`` (reaper, GC; it opens the database)
    with ``env`` (a cluster's, with its database settings), output to ``log_path``."""
    from registry.management.services import master_worker_command

    var_dir = log_path.parent / f"master-{namespace}"  # its own beat schedule file
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*master_worker_command(namespace), "-n", f"master-{uuid_module.uuid4().hex[:8]}@%h"],
            cwd=REPO,
            env=dict(env, HEADWAY_QUEUE=namespace, HEADWAY_VAR_DIR=str(var_dir)),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start_worker(
    env: dict[str, str],
    log_path: Path,
    queue: str,
    host_name: str,
    concurrency: int = 2,
    nodename: str | None = None,
    token: str | None = None,
) -> subprocess.Popen:
    """Start one host agent (its own session, output to ``log_path``) as host ``host_name`` in
    namespace ``queue`` with ``env`` less its database settings, and a host token (``token``,
    else a new one). ``env`` names the master in ``HEADWAY_MASTER_URL``.

    ``nodename``: the Celery node name (``-n``), for a test that sends this worker remote
    control commands: every test worker is ``celery@<hostname>`` otherwise, and a broadcast
    without a destination reaches them all (the other xdist process's too).
    """
    from registry.management.services import agent_command, agent_environment

    key = token or new_host_key()
    # No database access in a module fixture: `renew_host_tokens` creates it there.
    with contextlib.suppress(RuntimeError):
        host_token(host_name, key)
    agent_env = agent_environment(env, key, env["HEADWAY_MASTER_URL"])
    agent_env.update(HEADWAY_QUEUE=queue, HEADWAY_HOST_NAME=host_name)
    command = agent_command(concurrency, namespace=queue, host_name=host_name)
    if nodename:
        command += ["-n", nodename]
    with open(log_path, "ab") as log:
        agent = subprocess.Popen(
            command,
            cwd=REPO,
            env=agent_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    agent.host_name, agent.host_token = host_name, key  # type: ignore[attr-defined]
    return agent


def renew_host_tokens(workers: list[subprocess.Popen]) -> None:
    """Create again the host tokens of the agents among ``workers`` (``start_worker``'s): a
    transactional test's flush deleted them, and a module's agents outlive a test."""
    for worker in workers:
        if hasattr(worker, "host_token"):
            host_token(worker.host_name, worker.host_token)  # type: ignore[attr-defined]


def stop_workers(workers: list[subprocess.Popen]) -> None:
    """SIGTERM each worker's process group, SIGKILL what is left after 30 s."""
    for worker in workers:
        worker.terminate()
    for worker in workers:
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
