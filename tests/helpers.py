"""Helpers shared by test modules: service checks, polling, archives, experiment configs.

Test modules import from here, never from each other or from ``plugin.py``; what needs pytest's
set-up and teardown is a fixture in ``plugin.py`` (the fixtures of tests/ and e2e_tests/) instead.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid as uuid_module
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO = Path(__file__).resolve().parent.parent


def require(condition: bool, why: str) -> None:
    """Skip when a needed service is missing, except in CI where that fails the run."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{why} (CI=true: a missing service must fail, not skip)")
    pytest.skip(why)


def wait_for_or_false(predicate: Callable[[], object], timeout: float, interval: float = 0.25):
    """Poll ``predicate`` until it returns something truthy (returned); False after ``timeout``
    seconds, for a caller that gathers its own evidence before failing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return False


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` on timeout."""
    value = wait_for_or_false(predicate, timeout, interval)
    if not value:
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
    return value


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the log file ``path``, headed by its name, for a failure
    message that must explain itself once the run's temporary files are gone (CI)."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"--- {path.name}: unreadable ({exc})"
    return "\n".join([f"--- {path.name} (last {len(text)} lines)", *text])


def make_tar_gz(files: dict[str, bytes | str]) -> bytes:
    """A tar.gz with the given regular files (name -> content)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def free_port() -> int:
    """A TCP port unused on every local address (the OS picks it on the wildcard address).

    Checking only 127.0.0.1 could hand out a port some server already listens on at another
    address (a netns cluster's moto S3 on its bridge address), and a server later given that
    port on that address would fail to bind while clients reached the other one."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def serves_headway(url: str) -> bool:
    """Whether ``url`` answers Headway's ``/healthz`` now (not merely whether something listens
    on its port: a port taken by another server would pass that check). Asked directly, never
    through a proxy from the environment."""
    import urllib.request

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(f"{url}/healthz", timeout=2) as response:
            return bool(json.loads(response.read()) == {"status": "ok"})
    except (OSError, ValueError):
        return False


def answer_json(handler: Any, payload: object, status: int = 200) -> None:
    """Send ``payload`` as a JSON answer from an ``http.server.BaseHTTPRequestHandler``."""
    body = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def requirement_names(requirements: list[str]) -> set[str]:
    """The distribution names of pyproject requirement strings, lower-cased (``"Django>=5.1,<6"``
    -> ``"django"``, ``"celery[redis]>=5.4"`` -> ``"celery"``)."""
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def register_host(name: str, slots: int, gpu: bool = False, pool: str | None = None):
    """Register (or refresh) an alive worker host as its worker would; returns the row.

    Devices are ``"0"``.. on a GPU host, ``"cpu0"``.. otherwise; ``pool`` defaults to the
    resource pool ``default``; the host joins this process's namespace (``HEADWAY_QUEUE``).
    """
    from django.utils import timezone

    from registry import scheduling
    from registry.lifecycle.host_agent import host_queue

    return scheduling.host_heartbeat(
        name=name,
        pool=pool or _default_pool(),
        queue=host_queue(name),
        slots=slots,
        devices=[str(i) if gpu else f"cpu{i}" for i in range(slots)],
        gpu=gpu,
        started_at=timezone.now(),
    )


def _default_pool() -> str:
    from registry.pools import DEFAULT_POOL

    return DEFAULT_POOL


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


# A valid experiment with one trial whose entrypoint class exists in TINY_MODEL.
TINY_CONFIG = """
name: tiny
entrypoint: model_def:TinyTrial
hyperparameters:
  global_batch_size: 8
  lr: {type: log, minval: -3, maxval: -1}
searcher: {name: single, metric: validation_loss, max_length: {batches: 10}}
"""
TINY_MODEL = make_tar_gz({"model_def.py": "class TinyTrial:\n    pass\n"})


def submit_single_trial(owner, **resources):
    """A single-trial experiment of ``owner`` with these ``resources`` (``slots_per_trial``,
    ``priority``, ``resource_pool``...), created through the lifecycle; returns its trial."""
    from registry import lifecycle

    config = {
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
        "resources": resources,
    }
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=config, model_definition=TINY_MODEL
    )
    return experiment.trials.get()


def create_experiment(api, config=TINY_CONFIG, model=TINY_MODEL):
    """POST an experiment with the DRF test client ``api``; return the response."""
    return api.post(
        "/api/v1/experiments/", {"config": config, "model_definition": b64(model)}, format="json"
    )


def queued_experiment(owner, config_source: str):
    """An experiment created through the lifecycle with a no-op ``train.py``; nothing runs it.

    Its one trial's run stays QUEUED unless a test places and starts it.
    """
    from registry.lifecycle import experiment_create

    return experiment_create(
        owner=owner,
        config_source=config_source,
        model_definition=make_tar_gz({"train.py": "print('hi')\n"}),
    )


# A stored experiment's config as the dashboard reads it (built with the ORM, not validated).
DASHBOARD_CONFIG = {
    "searcher": {
        "name": "single",
        "metric": "validation_accuracy",
        "smaller_is_better": False,
        "max_length": {"batches": 100},
    },
    "entrypoint": "model_def:T",
    "hyperparameters": {},
    "reproducibility": {"experiment_seed": 7},
}


def start_run(trial):
    """What a worker does: claim the trial's queued run and start its process (lifecycle calls)."""
    from registry import lifecycle

    run = lifecycle.trial_run_claim(trial_id=trial.id, run_id=trial.run_id, worker="test")
    assert run is not None
    lifecycle.trial_run_running(trial_id=trial.id, run_id=run.run_id)
    return run


def reload(instance):
    """``instance`` with its fields read again from the database."""
    instance.refresh_from_db()
    return instance


def current_run(trial):
    """The ``TrialRun`` the trial is on now."""
    from registry.models import TrialRun

    return TrialRun.objects.get(trial=trial, run_id=reload(trial).run_id)


def register_checkpoint(
    trial,
    uuid: str | uuid_module.UUID | None = None,
    steps_completed: int = 10,
    run_id: int | None = 1,
    size: int = 10,
):
    """Register a checkpoint of ``trial`` as its run would (lifecycle call); returns it.

    ``uuid`` defaults to a fresh one; the checkpoint holds one file of ``size`` bytes.
    """
    from registry import lifecycle

    checkpoint, _ = lifecycle.checkpoint_register(
        trial_id=trial.id,
        uuid=uuid_module.UUID(str(uuid)) if uuid is not None else uuid_module.uuid4(),
        steps_completed=steps_completed,
        run_id=run_id,
        resources={"state-dict.pth": size},
        metadata={"steps_completed": steps_completed},
    )
    return checkpoint


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
    from config.services import master_worker_command

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
    from config.services import agent_command, agent_environment

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
