"""Start and stop the embedded services as child processes (``serve``, ``demo``; also the
``worker`` command's host token and agent environment), next to the commands that use them.

Three children: the web server (gunicorn), the master's Celery worker (the lost-run reaper,
checkpoint GC and deletions, with beat; it opens the database) and one host agent for this
machine (``python -m workers``: the REST-only worker host, with a host token issued here and
no database settings in its environment, as on a GPU host; docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WEB_STOP_GRACE_S = 10.0  # gunicorn's graceful stop of its threads, then SIGKILL


def agent_command(
    concurrency: int, namespace: str | None = None, host_name: str | None = None
) -> list[str]:
    """The host agent's Celery worker for host ``host_name`` (threads pool: each task waits on
    a process): it consumes only the host's queue ``<namespace>.host.<host_name>``, where the
    master sends the runs placed there. ``namespace`` defaults to ``CELERY_TASK_DEFAULT_QUEUE``
    (``HEADWAY_QUEUE``) and ``host_name`` to ``HEADWAY_HOST_NAME``: pass the values the agent's
    environment holds. ``concurrency`` should be the host's slots + 1 (its heartbeat thread is
    its own)."""
    from workers.hosts import celery_command

    return celery_command(
        agent_queue(host_name or settings.HEADWAY_HOST_NAME, namespace), concurrency
    )


def agent_queue(host_name: str, namespace: str | None = None) -> str:
    """Host ``host_name``'s Celery queue (``headway.client.wire.host_queue_name``)."""
    from headway.client import wire

    return wire.host_queue_name(namespace or settings.CELERY_TASK_DEFAULT_QUEUE, host_name)


def master_worker_command(namespace: str | None = None) -> list[str]:
    """The master's Celery worker: it consumes the namespace's queue ``namespace`` (default
    ``HEADWAY_QUEUE``: the lost-run reaper its embedded beat sends, checkpoint GC, experiment
    deletion) and opens the database; worker hosts never run it."""
    return [
        sys.executable, "-m", "celery", "-A", "config", "worker",
        "-Q", namespace or settings.CELERY_TASK_DEFAULT_QUEUE,
        "--pool=threads", "--concurrency=2",
        "--without-gossip", "--without-mingle", "-l", "info",
        "-B",  # embedded beat: sends the lost-run reaper (CELERY_BEAT_SCHEDULE)
    ]  # fmt: skip


# What a host agent's environment never holds: it talks to the master over REST only.
SERVER_ONLY_VARIABLES = ("DATABASE_URL", "SECRET_KEY")


def agent_environment(
    base: dict[str, str], host_token: str, master_url: str | None = None
) -> dict[str, str]:
    """``base`` for a host agent on this machine: the master's URL (default
    ``HEADWAY_MASTER_URL``) and ``host_token``, and no database settings or secret key
    (``SERVER_ONLY_VARIABLES``)."""
    env = {k: v for k, v in base.items() if k not in SERVER_ONLY_VARIABLES}
    env["HEADWAY_MASTER"] = master_url or settings.HEADWAY_MASTER_URL
    env["HEADWAY_HOST_TOKEN"] = host_token
    # The filesystem broker's folders are the master's (same HEADWAY_VAR_DIR).
    env.setdefault("HEADWAY_VAR_DIR", str(settings.VAR_DIR))
    return env


def issue_local_host_token(name: str) -> str:
    """A fresh host token for host ``name`` on this machine (a live one is revoked first: the
    process holding it is gone or about to be replaced); return its key."""
    from registry.lifecycle.host_tokens import TokenNotFound, host_token_issue, host_token_revoke

    with contextlib.suppress(TokenNotFound):
        host_token_revoke(name)
    return host_token_issue(name, created_by=None)[1]


def web_command(port: int, bind: str = "127.0.0.1") -> list[str]:
    """The web server command line: gunicorn with threads (``config/gunicorn.py``), on
    ``bind`` (loopback by default; the Docker image binds all interfaces through
    ``deploy/entrypoint.sh web``)."""
    address = f"[{bind}]" if ":" in bind else bind
    return [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"{address}:{port}",
    ]  # fmt: skip


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ``::1``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: whatever it resolves to, it is meant for others


def exposure_warning(bind: str) -> str | None:
    """A warning when the embedded setup (SQLite, no ``HEADWAY_TRIAL_USER``) is served on a
    non-loopback address ``bind``: its worker runs everyone's trial code as the server's own
    user, with the server's files and secrets in reach (docs/security.md). None otherwise."""
    embedded = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if is_loopback(bind) or not embedded or settings.HEADWAY_TRIAL_USER:
        return None
    return (
        f"WARNING: serving the embedded setup on {bind}, beyond this machine. Its worker runs "
        "every user's trial code as this server's own user, which can read the SQLite "
        "database, the secret key and every checkpoint. Let only trusted users in, or set "
        "HEADWAY_TRIAL_USER (the worker then runs as root) or deploy with PostgreSQL and "
        "separate worker hosts (docs/deployment.md)."
    )


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the serving process dies, even by SIGKILL
    (Linux ``PR_SET_PDEATHSIG``), so the web server and worker never outlive ``serve``."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, sig)


class Services:
    """Web server + master worker + this machine's host agent as child processes; ``stop()``
    (or leaving the ``with``) ends them.

    Arguments:
        port (int): web port.
        concurrency (int): trials the host agent runs at once: its host registers this many
            CPU slots (``HEADWAY_SLOTS``).
        log_dir (Path | None): write each child's output to ``<log_dir>/{web,master,worker}.log``
            instead of this terminal.
        bind (str): the web server's address (loopback by default).
    """

    def __init__(
        self, port: int, concurrency: int = 1, log_dir: Path | None = None, bind: str = "127.0.0.1"
    ) -> None:
        self.port = port
        self.bind = bind
        self.concurrency = concurrency
        self.log_dir = log_dir
        self.children: list[subprocess.Popen] = []
        self.agent: subprocess.Popen | None = None

    def _spawn(
        self, name: str, command: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (owned by the child)
        child = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=dict(env if env is not None else os.environ, HEADWAY_PORT=str(self.port)),
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            # Own process group: stop() reaches the master worker's embedded beat child too.
            start_new_session=True,
            preexec_fn=_die_with_parent,  # no threads started yet here
        )
        self.children.append(child)
        return child

    def start(self, timeout: float = 60.0) -> None:
        """Start them and wait until ``/healthz`` answers; raise RuntimeError after ``timeout``.

        On failure the children are stopped before the error propagates.
        """
        # From the first child on, SIGTERM and SIGINT stop the services (start's clean-up or
        # wait's return); SIGINT too because a process started in the background by a
        # non-interactive shell (or a supervisor) inherits it ignored, and Python then installs
        # no handler for it.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _interrupt)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        self._spawn("web", web_command(self.port, self.bind))
        self._spawn("master", master_worker_command())
        # One host with `concurrency` CPU slots (one more thread than slots).
        token = issue_local_host_token(settings.HEADWAY_HOST_NAME)
        master = os.environ.get("HEADWAY_MASTER_URL") or f"http://127.0.0.1:{self.port}"
        env = agent_environment(dict(os.environ), token, master)
        env["HEADWAY_SLOTS"] = str(self.concurrency)
        self.agent = self._spawn("worker", agent_command(self.concurrency + 1), env)
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.port}/healthz"
        while time.monotonic() < deadline:
            if any(child.poll() is not None for child in self.children):
                raise RuntimeError("a service exited at start; see its output above")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")

    def wait(self) -> None:
        """Block until a child exits, Ctrl-C or SIGTERM (then the caller stops the children)."""
        try:
            while all(child.poll() is None for child in self.children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass

    def stop(self) -> None:
        """Stop the host agent, then the master worker, then the web server: SIGTERM each
        child's process group, SIGKILL what is left after its grace period.

        The agent goes first because its warm shutdown preempts running trials, and a trial
        learns of that and registers its checkpoint through the web server; stopping all at
        once left trials unable to checkpoint until the kill grace ran out. The agent's stop
        takes up to twice ``HEADWAY_KILL_GRACE_SECONDS`` with trials running, a few seconds
        without; the others' a few seconds.
        """
        agent_grace = 2 * settings.HEADWAY_KILL_GRACE_SECONDS + WEB_STOP_GRACE_S
        for child in reversed(self.children):  # started web, master, agent
            grace = agent_grace if child is self.agent else WEB_STOP_GRACE_S
            if child.poll() is None:
                _signal_group(child, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=grace)
            _signal_group(child, signal.SIGKILL)
