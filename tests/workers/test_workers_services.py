"""``serve``/``demo``'s child processes: their command lines, start-up check and stopping.

The web server and worker are external programs here: small ``python -c`` stand-ins take their
place, so the start-up and stop logic runs against real processes in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import REPO, free_port, process_alive, wait_for
from workers import services

# Answers /healthz on HEADWAY_PORT, as the real web server does.
HEALTHZ = """
import http.server, os
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
port = int(os.environ["HEADWAY_PORT"])
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

SLEEPER = "import time; time.sleep(300)"

# Obeys SIGTERM itself, but first starts a child that ignores it; reports both once set up.
PARENT_OF_STUBBORN = """
import os, subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c",
     "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True);"
     " time.sleep(300)"],
    stdout=subprocess.PIPE,
)
child.stdout.readline()
print("ready", os.getpid(), child.pid, os.environ["HEADWAY_PORT"], os.getcwd(), flush=True)
time.sleep(300)
"""


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def stand_ins(monkeypatch):
    """Replace the web server and worker command lines with the given ``python -c`` scripts."""

    def install(web: str, worker: str) -> None:
        monkeypatch.setattr(services, "web_command", lambda *args, **kwargs: _python(web))
        monkeypatch.setattr(services, "worker_command", lambda *args, **kwargs: _python(worker))

    return install


@pytest.fixture
def children():
    """Services objects made by the test; whatever still runs at teardown is stopped."""
    made: list[services.Services] = []

    def make(**kwargs) -> services.Services:
        made.append(services.Services(**kwargs))
        return made[-1]

    yield make
    for svc in made:
        svc.stop()


def test_the_worker_reads_its_host_queue_and_the_pool_queue(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "runs-here"
    settings.HEADWAY_HOST_NAME = "gpu-a"
    command = services.worker_command(concurrency=3)
    assert command[:6] == [sys.executable, "-m", "celery", "-A", "config", "worker"]
    # Placed runs go to the host's queue; the pool queue carries the lost-run reaper.
    assert command[command.index("-Q") + 1] == "runs-here.host.gpu-a,runs-here"
    assert "--pool=threads" in command and "--concurrency=3" in command
    assert "-B" in command  # the embedded beat sends the lost-run reaper
    explicit = services.worker_command(concurrency=1, queue="elsewhere", host_name="gpu-b")
    assert explicit[explicit.index("-Q") + 1] == "elsewhere.host.gpu-b,elsewhere"


def test_the_worker_of_serve_and_demo_is_one_host_with_the_configured_slots(children, monkeypatch):
    commands: list[int] = []
    spawned: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        services, "worker_command", lambda concurrency: commands.append(concurrency) or ["w"]
    )
    svc = children(port=free_port(), concurrency=3)
    monkeypatch.setattr(svc, "_spawn", lambda name, command, **env: spawned.append((name, env)))
    with pytest.raises(RuntimeError):
        svc.start(timeout=0.1)  # nothing answers /healthz: only the spawned commands matter
    assert commands == [4]  # one thread per slot, one for the reaper
    assert ("worker", {"HEADWAY_SLOTS": "3"}) in spawned


def test_the_web_server_listens_on_localhost_at_the_port():
    assert services.web_command(8123) == [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "config/gunicorn.py",
        "config.wsgi:application",
        "--bind",
        "127.0.0.1:8123",
    ]


def test_start_returns_once_healthz_answers(stand_ins, children, tmp_path):
    stand_ins(web=HEALTHZ, worker=SLEEPER)
    svc = children(port=free_port(), log_dir=tmp_path)
    svc.start(timeout=120)
    assert [child.poll() for child in svc.children] == [None, None]
    assert (tmp_path / "web.log").exists() and (tmp_path / "worker.log").exists()


def test_start_fails_and_stops_both_when_a_child_exits(stand_ins, children):
    stand_ins(web="raise SystemExit(3)", worker=SLEEPER)
    svc = children(port=free_port())
    with pytest.raises(RuntimeError, match="exited at start"):
        svc.start(timeout=120)
    web, worker = svc.children
    assert web.returncode == 3
    assert worker.returncode == -signal.SIGTERM


def test_stop_ends_each_childs_whole_process_group(children, settings, tmp_path):
    settings.HEADWAY_KILL_GRACE_SECONDS = 0.5
    svc = children(port=free_port(), log_dir=tmp_path)
    svc._spawn("worker", _python(PARENT_OF_STUBBORN))
    log = tmp_path / "worker.log"
    line = wait_for(
        lambda: log.exists() and log.read_text().endswith("\n") and log.read_text(),
        60,
        "the child to be ready",
    )
    ready, parent, child, port, cwd = line.split()
    assert (ready, int(port), Path(cwd)) == ("ready", svc.port, Path(settings.BASE_DIR))
    svc.stop()
    assert svc.children[0].returncode == -signal.SIGTERM
    # The child ignored SIGTERM: the SIGKILL to the group after the wait ended it.
    wait_for(lambda: not process_alive(int(child)), 60, "the stubborn child to die")
    assert not process_alive(int(parent))


def test_wait_returns_when_a_child_exits_and_restores_sigterm(children):
    svc = children(port=free_port())
    svc._spawn("web", _python(""))
    svc._spawn("worker", _python(SLEEPER))
    handler = signal.getsignal(signal.SIGTERM)
    svc.wait()
    assert svc.children[0].poll() == 0 and svc.children[1].poll() is None
    assert signal.getsignal(signal.SIGTERM) is handler


# On SIGTERM, asks the web server's /healthz and prints the status before exiting, as a worker's
# warm shutdown needs the web server to register the checkpoints of the trials it preempts.
ASKS_WEB_ON_SIGTERM = """
import os, signal, sys, time, urllib.request
def stop(signum, frame):
    url = "http://127.0.0.1:%s/healthz" % os.environ["HEADWAY_PORT"]
    try:
        status = urllib.request.urlopen(url, timeout=5).status
    except OSError as exc:
        status = type(exc).__name__
    print("web answered", status, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(300)
"""


def test_stop_stops_the_worker_while_the_web_server_still_answers(children, tmp_path):
    svc = children(port=free_port(), log_dir=tmp_path)
    svc._spawn("web", _python(HEALTHZ))
    svc._spawn("worker", _python(ASKS_WEB_ON_SIGTERM))
    log = tmp_path / "worker.log"
    wait_for(lambda: log.exists() and "ready" in log.read_text(), 60, "the worker")
    wait_for(lambda: _healthz(svc.port) == 200, 60, "the web stand-in to answer")
    svc.stop()
    assert "web answered 200" in log.read_text()
    assert [child.poll() is not None for child in svc.children] == [True, True]


# Makes a Services object, starts a sleeper under it and prints the sleeper's pid.
SERVING_PARENT = """
import os, sys, time
import django
django.setup()
from workers.services import Services
svc = Services(port=0)
svc._spawn("worker", [sys.executable, "-c", "import time; time.sleep(300)"])
print(svc.children[0].pid, flush=True)
time.sleep(300)
"""


def test_children_never_outlive_a_killed_serve():
    parent = subprocess.Popen(
        _python(SERVING_PARENT),
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=REPO,
    )
    child = int(parent.stdout.readline())
    assert process_alive(child)
    parent.kill()  # SIGKILL: serve gets no chance to stop its children itself
    parent.wait()
    wait_for(lambda: not process_alive(child), 60, "the orphaned child to die")


def _healthz(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status
    except OSError:
        return None
