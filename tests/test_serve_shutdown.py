"""The real ``manage.py serve`` (gunicorn + Celery worker) stops on SIGTERM or SIGINT, children too.

tests/test_workers_services.py checks the stop logic against stand-in children in seconds; this
runs the real web server and worker on the embedded default once per signal, as ``make serve``
and the benchmarks (bench/preempt_latency.py) do, and checks that serve exits by itself and
leaves none of its processes behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.helpers import free_port, wait_for

REPO = Path(__file__).resolve().parent.parent
# Generous: serve's own stop takes a few seconds; this bound only catches a hang on a busy CI.
EXIT_BOUND_S = 60


def _healthz(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_its_web_server_and_worker_on_a_signal(signum, tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        HEADWAY_VAR_DIR=str(tmp_path),
        HEADWAY_PORT=str(port),
        HEADWAY_QUEUE=f"serve-shutdown-{os.getpid()}",
    )
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=REPO, check=True)
    with open(tmp_path / "serve.log", "wb") as log:
        serve = subprocess.Popen(
            [*manage, "serve", "--port", str(port)],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so the clean-up below can reach anything left behind
        )
    family: list[psutil.Process] = []
    try:
        wait_for(lambda: _healthz(port), 120, "serve's web server to answer")
        family = psutil.Process(serve.pid).children(recursive=True)
        commands = " ".join(" ".join(proc.cmdline()) for proc in family)
        assert "gunicorn" in commands and "worker" in commands, commands
        serve.send_signal(signum)
        serve.wait(timeout=EXIT_BOUND_S)
        _, alive = psutil.wait_procs(family, timeout=EXIT_BOUND_S)
        assert not alive, [proc.cmdline() for proc in alive]
        assert not _healthz(port)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        for proc in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        print((tmp_path / "serve.log").read_text()[-3000:])
