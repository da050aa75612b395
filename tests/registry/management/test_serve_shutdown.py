"""The real ``manage.py serve`` (gunicorn, the master's Celery worker and this machine's host
agent) stops on SIGTERM or SIGINT, children too.

tests/registry/management/test_services.py checks the stop logic
(``registry.management.services``) against stand-in children in seconds; this runs the real web
server, master worker and host agent on the embedded
default, as ``make serve`` and the benchmarks (bench/preempt_latency.py) do, and checks that serve
exits by itself and leaves none of its processes behind: idle (once per signal), and while a
trial process is still starting (before its code could see a preemption, the case that used to
take 15-30 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import requests

from tests.helpers import REPO, b64, free_port, make_tar_gz, serves_headway, wait_for

# Generous: serve's own stop takes a few seconds; this bound only catches a hang on a busy CI.
EXIT_BOUND_S = 60
# A trial still starting (importing torch, say) cannot see a preemption yet: it sleeps here.
STARTING_TRIAL = "import time\ntime.sleep(600)\n"


def _healthz(port: int) -> bool:
    return serves_headway(f"http://127.0.0.1:{port}")


@dataclass
class Serve:
    """A running ``manage.py serve`` and what it needs to be checked and cleaned up."""

    proc: subprocess.Popen
    port: int
    env: dict[str, str]
    log: Path
    family: list[psutil.Process] = field(default_factory=list)

    def processes(self) -> list[psutil.Process]:
        """serve's descendants now (the web server, the master worker, the host agent and what
        they started)."""
        return psutil.Process(self.proc.pid).children(recursive=True)

    def commands(self) -> list[str]:
        """The command lines of ``processes()``; one that exited meanwhile (gone, or a zombie
        not yet reaped, which has no command line) is left out."""
        out = []
        for proc in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):  # ZombieProcess is one
                out.append(" ".join(proc.cmdline()))
        return out

    def stop_and_check(self, signum: int) -> float:
        """Send ``signum``; assert serve and every process seen exit; return the seconds taken."""
        self.family = self.processes()
        started = time.monotonic()
        self.proc.send_signal(signum)
        self.proc.wait(timeout=EXIT_BOUND_S)
        _, alive = psutil.wait_procs(self.family, timeout=EXIT_BOUND_S)
        took = time.monotonic() - started
        assert not alive, [proc.cmdline() for proc in alive]
        assert not _healthz(self.port)
        return took


@contextlib.contextmanager
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``manage.py serve`` on a fresh embedded setup, answering ``/healthz``; killed (its whole
    session) on the way out if it is still there."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        HEADWAY_VAR_DIR=str(tmp_path),
        HEADWAY_PORT=str(port),
        HEADWAY_QUEUE=f"serve-shutdown-{os.getpid()}-{port}",
    )
    manage = [sys.executable, str(REPO / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=REPO, check=True)
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*manage, "serve", "--port", str(port)],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so the clean-up below can reach anything left behind
        )
    running = Serve(proc, port, env, log)
    try:
        wait_for(lambda: _healthz(port), 120, "serve's web server to answer")
        yield running
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for child in running.family:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        print(log.read_text()[-3000:])


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_its_web_server_master_worker_and_agent_on_a_signal(signum, tmp_path):
    with serve(tmp_path) as running:
        commands = " ".join(running.commands())
        assert "gunicorn" in commands, commands
        assert "-A config worker" in commands, commands  # the master's worker
        assert "-A workers worker" in commands, commands  # the host agent
        took = running.stop_and_check(signum)
        print(f"serve stopped in {took:.1f} s after {signal.Signals(signum).name}")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_while_a_trial_is_starting(signum, tmp_path):
    with serve(tmp_path) as running:
        token = subprocess.run(
            [sys.executable, "manage.py", "headway_token", "alice", "--create"],
            env=running.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        config = {
            "name": "starting-when-stopped",
            "entrypoint": "python starting.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        }
        answer = requests.post(
            f"http://127.0.0.1:{running.port}/api/v1/experiments/",
            json={
                "config": config,
                "model_definition": b64(make_tar_gz({"starting.py": STARTING_TRIAL})),
            },
            headers={"Authorization": f"Token {token}"},
            timeout=60,
        )
        assert answer.status_code == 201, answer.text

        def trial_started() -> bool:
            return any("starting.py" in command for command in running.commands())

        wait_for(trial_started, 120, "the trial process to start")
        took = running.stop_and_check(signum)
        print(f"serve stopped in {took:.1f} s after {signal.Signals(signum).name}, trial starting")
