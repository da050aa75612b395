"""Helpers shared by test modules: service checks, polling, archives, experiment configs.

Test modules import from here, never from each other or from ``plugin.py``; what needs pytest's
set-up and teardown is a fixture in ``plugin.py`` (the fixtures of tests/ and e2e_tests/) instead.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import tarfile
import time
import uuid as uuid_module
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers_processes import (  # noqa: F401  (re-exported: tests import from here)
    free_port,
    host_token,
    is_rank_wrapper,
    new_host_key,
    process_alive,
    renew_host_tokens,
    run_python,
    run_ranks,
    spawn_python,
    start_host_workers,
    start_master_worker,
    start_worker,
    stop_workers,
)

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
