"""``serve``/``demo``'s child processes (``registry.management.services``): their command lines,
the host agent's environment and host token, start-up check and stopping.

The web server, the master's worker and the host agent are external programs here: small
``python -c`` stand-ins take their place, so the start-up and stop logic runs against real
processes in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from registry.management import services
from tests.helpers import REPO, free_port, process_alive, wait_for

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
    """Replace the web server's, the master worker's and the host agent's command lines with
    the given ``python -c`` scripts."""

    def install(web: str, master: str, agent: str) -> None:
        monkeypatch.setattr(services, "web_command", lambda *args, **kwargs: _python(web))
        monkeypatch.setattr(
            services, "master_worker_command", lambda *args, **kwargs: _python(master)
        )
        monkeypatch.setattr(services, "agent_command", lambda *args, **kwargs: _python(agent))

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


def _live_token(key: str):
    """The live ``HostToken`` whose key is ``key`` (None: unknown or revoked)."""
    from registry.models import HostToken

    return HostToken.objects.for_key(key)


def test_the_agent_reads_only_its_host_queue(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "runs-here"
    settings.HEADWAY_HOST_NAME = "gpu-a"
    command = services.agent_command(concurrency=3)
    # The host agent's own Celery app (no Django), not the master's.
    assert command[:6] == [sys.executable, "-m", "celery", "-A", "workers", "worker"]
    # Placed runs go to the host's queue; the namespace's queue (the reaper) is the master's.
    assert command[command.index("-Q") + 1] == "runs-here.host.gpu-a"
    assert "--pool=threads" in command and "--concurrency=3" in command
    assert "-B" not in command  # the beat (lost-run reaper) runs on the master only
    explicit = services.agent_command(concurrency=1, namespace="elsewhere", host_name="gpu-b")
    assert explicit[explicit.index("-Q") + 1] == "elsewhere.host.gpu-b"
    assert services.agent_queue("gpu-c", "ns") == "ns.host.gpu-c"


def test_the_master_worker_reads_the_namespace_queue_with_the_beat(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "runs-here"
    command = services.master_worker_command()
    assert command[:6] == [sys.executable, "-m", "celery", "-A", "config", "worker"]
    assert command[command.index("-Q") + 1] == "runs-here"
    assert "--pool=threads" in command
    assert "-B" in command  # the embedded beat sends the lost-run reaper
    explicit = services.master_worker_command("elsewhere")
    assert explicit[explicit.index("-Q") + 1] == "elsewhere"


def test_the_agent_environment_holds_the_master_and_host_token_and_no_server_secret(settings):
    settings.HEADWAY_MASTER_URL = "http://master.example:8000"
    base = {
        "PATH": "/usr/bin",
        "DATABASE_URL": "postgres://headway:pw@db/headway",
        "SECRET_KEY": "server-secret-key",
        "REDIS_URL": "redis://broker:6379/0",
    }
    env = services.agent_environment(base, "hwh_key")
    assert env["HEADWAY_MASTER"] == "http://master.example:8000"
    assert env["HEADWAY_HOST_TOKEN"] == "hwh_key"
    assert "DATABASE_URL" not in env and "SECRET_KEY" not in env
    assert env["PATH"] == "/usr/bin" and env["REDIS_URL"] == "redis://broker:6379/0"
    # The filesystem broker's folders are the master's.
    assert env["HEADWAY_VAR_DIR"] == str(settings.VAR_DIR)
    assert "DATABASE_URL" in base  # the caller's mapping is left as it was
    other = services.agent_environment(
        {"HEADWAY_VAR_DIR": "/srv/var"}, "hwh_other", "http://127.0.0.1:9"
    )
    assert other["HEADWAY_MASTER"] == "http://127.0.0.1:9"
    assert other["HEADWAY_VAR_DIR"] == "/srv/var"


@pytest.mark.django_db
def test_a_local_host_token_replaces_the_live_one_of_its_host():
    first = services.issue_local_host_token("serve-host")
    token = _live_token(first)
    assert token is not None and token.name == "serve-host"
    second = services.issue_local_host_token("serve-host")
    assert second != first
    assert _live_token(first) is None  # revoked: the process holding it is being replaced
    assert _live_token(second).name == "serve-host"


@pytest.mark.django_db
def test_serve_starts_web_master_and_one_host_agent_with_the_configured_slots(
    children, monkeypatch, settings
):
    settings.HEADWAY_HOST_NAME = "serve-host"
    monkeypatch.setenv("DATABASE_URL", "postgres://headway:pw@db/headway")
    monkeypatch.setenv("SECRET_KEY", "server-secret-key")
    monkeypatch.delenv("HEADWAY_MASTER_URL", raising=False)
    concurrency: list[int] = []
    spawned: dict[str, tuple[list[str], dict | None]] = {}
    monkeypatch.setattr(
        services, "agent_command", lambda c, *args: concurrency.append(c) or ["agent"]
    )
    port = free_port()
    svc = children(port=port, concurrency=3)
    monkeypatch.setattr(
        svc, "_spawn", lambda name, command, env=None: spawned.update({name: (command, env)})
    )
    with pytest.raises(RuntimeError):
        svc.start(timeout=0.1)  # nothing answers /healthz: only the spawned commands matter
    assert list(spawned) == ["web", "master", "worker"]
    assert spawned["web"][0] == services.web_command(port)
    assert spawned["master"][0] == services.master_worker_command()
    assert spawned["web"][1] is None and spawned["master"][1] is None  # the server's own env
    assert concurrency == [4]  # one thread per slot, one for the host's heartbeat
    agent_env = spawned["worker"][1]
    assert agent_env["HEADWAY_SLOTS"] == "3"
    assert agent_env["HEADWAY_MASTER"] == f"http://127.0.0.1:{port}"
    # The agent's token is a live host token of this machine's host name.
    token = _live_token(agent_env["HEADWAY_HOST_TOKEN"])
    assert token is not None and token.name == "serve-host"
    assert "DATABASE_URL" not in agent_env and "SECRET_KEY" not in agent_env


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
    assert services.web_command(8123, bind="::")[-1] == "[::]:8123"


@pytest.mark.django_db
def test_start_returns_once_healthz_answers(stand_ins, children, tmp_path):
    stand_ins(web=HEALTHZ, master=SLEEPER, agent=SLEEPER)
    svc = children(port=free_port(), log_dir=tmp_path)
    svc.start(timeout=120)
    assert [child.poll() for child in svc.children] == [None, None, None]
    assert svc.agent is svc.children[2]
    for name in ("web", "master", "worker"):
        assert (tmp_path / f"{name}.log").exists(), name


@pytest.mark.django_db
def test_start_fails_and_stops_all_when_a_child_exits(stand_ins, children):
    stand_ins(web="raise SystemExit(3)", master=SLEEPER, agent=SLEEPER)
    svc = children(port=free_port())
    with pytest.raises(RuntimeError, match="exited at start"):
        svc.start(timeout=120)
    web, master, agent = svc.children
    assert web.returncode == 3
    assert master.returncode == agent.returncode == -signal.SIGTERM


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
    svc._spawn("master", _python(SLEEPER))
    svc._spawn("worker", _python(SLEEPER))
    handler = signal.getsignal(signal.SIGTERM)
    svc.wait()
    assert svc.children[0].poll() == 0
    assert svc.children[1].poll() is None and svc.children[2].poll() is None
    assert signal.getsignal(signal.SIGTERM) is handler


# On SIGTERM, asks the web server's /healthz and reads the master stand-in's log (whether it
# was stopped already), prints both and exits: the agent's warm shutdown needs the web server to
# register the checkpoints of the trials it preempts.
ASKS_WEB_ON_SIGTERM = """
import os, signal, sys, time, urllib.request
def stop(signum, frame):
    url = "http://127.0.0.1:%s/healthz" % os.environ["HEADWAY_PORT"]
    try:
        status = urllib.request.urlopen(url, timeout=5).status
    except OSError as exc:
        status = type(exc).__name__
    with open(os.environ["MASTER_LOG"]) as log:
        master = "stopped" if "stopped" in log.read() else "running"
    print("web answered", status, "master", master, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(300)
"""

# Prints "stopped" on SIGTERM, then exits.
SAYS_STOPPED = """
import signal, sys, time
def stop(signum, frame):
    print("stopped", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(300)
"""


def test_stop_stops_the_agent_first_while_the_web_server_still_answers(children, tmp_path):
    svc = children(port=free_port(), log_dir=tmp_path)
    svc._spawn("web", _python(HEALTHZ))
    master = svc._spawn("master", _python(SAYS_STOPPED))
    agent_log, master_log = tmp_path / "worker.log", tmp_path / "master.log"
    env = dict(os.environ, MASTER_LOG=str(master_log))
    svc.agent = svc._spawn("worker", _python(ASKS_WEB_ON_SIGTERM), env)
    wait_for(lambda: agent_log.exists() and "ready" in agent_log.read_text(), 60, "the agent")
    wait_for(lambda: master_log.exists() and "ready" in master_log.read_text(), 60, "the master")
    wait_for(lambda: _healthz(svc.port) == 200, 60, "the web stand-in to answer")
    svc.stop()
    # The agent stopped first: the web server answered it and the master still ran.
    assert "web answered 200 master running" in agent_log.read_text()
    assert "stopped" in master_log.read_text() and master.returncode == 0
    assert [child.poll() is not None for child in svc.children] == [True, True, True]


# Makes a Services object, starts a sleeper under it and prints the sleeper's pid.
SERVING_PARENT = """
import os, sys, time
import django
django.setup()
from registry.management.services import Services
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
