"""gunicorn settings of Headway's web server (``make serve``, ``make demo``, the Docker image).

Threads, not processes, hold the long requests: each SDK keeps a preemption long-poll open
(``GET trials/{id}/preempt/?timeout=60``), so a server needs one free thread per running trial
plus some for the dashboard. gthread workers (256 threads each) held 200 such polls while the
dashboard stayed fast (bench/serving.py, docs/deployment.md); sync workers hold one request each.
"""

import os
import shutil
from pathlib import Path

from config.env import envint, envstr

bind = [f"{envstr('HEADWAY_BIND', '127.0.0.1')}:{envint('HEADWAY_PORT', 8000)}"]
# gthread, with a kept-alive connection's next request served by the thread that answered it.
worker_class = "config.gunicorn_worker.FollowUpThreadWorker"
workers = envint("HEADWAY_WEB_WORKERS", 2)
# A worker queues connections beyond its threads (they wait for a free one), and connections are
# not spread evenly over workers: size threads per worker for all long-polls, not workers x threads.
threads = envint("HEADWAY_WEB_THREADS", 256)
# gthread workers heartbeat from their main loop, so a 60 s long-poll is no "worker timeout".
timeout = 120
graceful_timeout = 30
keepalive = 5
# Import Django once in the master: workers answer their first request at once (and share pages).
preload_app = True
# Requests are logged by Django at WARNING and above; gunicorn's own messages to stderr.
accesslog = None
errorlog = "-"
loglevel = envstr("LOG_LEVEL", "INFO").lower()

# Prometheus request series (registry/prometheus.py) summed over the worker processes:
# prometheus_client's multiprocess mode, each process writing its values to files in one folder.
# The variable must be set before prometheus_client is imported (preload_app imports Django in
# this master), so here. Unset, the folder is this master's own under HEADWAY_VAR_DIR, removed
# when it exits (several servers on one machine never share one); set, it is the admin's and is
# emptied at start, as prometheus_client asks.
_own_prometheus_dir = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _own_prometheus_dir:
    _var = Path(envstr("HEADWAY_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var")))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_var / "prometheus" / f"gunicorn-{os.getpid()}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def on_starting(server):
    """Start with an empty metrics folder; drop the folders masters that died left behind."""
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    if _own_prometheus_dir:
        for old in folder.parent.glob("gunicorn-*"):
            pid = old.name.removeprefix("gunicorn-")
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(old, ignore_errors=True)


def child_exit(server, worker):
    """A worker process ended: its live gauges stop counting (prometheus_client's advice)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _own_prometheus_dir:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
