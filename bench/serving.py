"""Application server under long-polls: 200 concurrent preemption long-polls
(``GET trials/{id}/preempt/?timeout=S`` with a run token) held open while dashboard requests
(the experiment list page, logged in, and ``GET /api/v1/experiments/``) are timed.

Servers compared in the same run: Django's ``runserver`` (the former ``make serve``), gunicorn
with gthread workers (``config/gunicorn.py``, what ``make serve`` runs now) and uvicorn workers
(ASGI; only when uvicorn is importable). SQLite, embedded defaults, loopback.
Target: every poll held and answered 200, dashboard p95 < 100 ms.
Ends with one line holding a JSON object of the figures.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import MANAGE, Backend, Server, percentile, single_file_model_definition
from _tiny import pick, tiny

POLLS = int(os.environ.get("BENCH_POLLS", str(pick(200, 10))))
POLL_TIMEOUT_S = int(os.environ.get("BENCH_POLL_TIMEOUT", str(pick(60, 5))))
DASHBOARD_REQUESTS = int(os.environ.get("BENCH_DASHBOARD_REQUESTS", str(pick(60, 5))))
CONFIG = "name: serving\nentrypoint: python x.py\nsearcher: {name: single, metric: loss, max_length: 1}\n"
# Claims and starts the experiment's run as a worker would; prints its token.
RUN_TOKEN = (
    "from registry import lifecycle; from registry.models import Trial; "
    "t = Trial.objects.get(); r = lifecycle.trial_run_claim(trial_id=t.id, run_id=t.run_id, "
    "worker='bench'); lifecycle.trial_run_running(trial_id=t.id, run_id=r.run_id); "
    "print(t.id, r.token)"
)
USER = "from django.contrib.auth.models import User; User.objects.create_user('dash', password='pw-dash')"


class GunicornServer(Server):
    """gunicorn with Headway's config file (gthread workers)."""

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py",
                "config.wsgi:application", "--bind", f"127.0.0.1:{self.port}"]  # fmt: skip


class UvicornServer(Server):
    """uvicorn workers serving Django's ASGI application (sync views run in a thread)."""

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "uvicorn", "--factory", "django.core.asgi:get_asgi_application",
                "--host", "127.0.0.1", "--port", str(self.port), "--workers", "2",
                "--log-level", "warning"]  # fmt: skip


class RunServer(Server):
    """Django's threaded development server."""

    def _command(self) -> list[str]:
        return [sys.executable, MANAGE, "runserver", "--noreload", f"127.0.0.1:{self.port}"]


def _dashboard_session(url: str) -> requests.Session:
    http = requests.Session()
    http.get(f"{url}/accounts/login/", timeout=10)
    http.post(
        f"{url}/accounts/login/",
        {
            "username": "dash",
            "password": "pw-dash",
            "csrfmiddlewaretoken": http.cookies["csrftoken"],
        },
        headers={"Referer": f"{url}/accounts/login/"},
        timeout=10,
    )
    return http


def measure(server_cls: type[Server], label: str) -> dict:
    backend = Backend.sqlite()
    try:
        token = backend.prepare()
        backend.manage("shell", "-c", USER)
        with server_cls(backend) as server:
            url = server.url
            auth = {"Authorization": f"Token {token}"}
            created = requests.post(f"{url}/api/v1/experiments/", headers=auth, timeout=30, json={
                "config": CONFIG, "model_definition": single_file_model_definition("x.py", "")})  # fmt: skip
            created.raise_for_status()
            trial_id, run_token = (
                backend.manage("shell", "-c", RUN_TOKEN).strip().splitlines()[-1].split()
            )
            poll_url = f"{url}/api/v1/trials/{trial_id}/preempt/?timeout={POLL_TIMEOUT_S}"
            results: list[int | str] = []
            lock = threading.Lock()

            def poll() -> None:
                answer: int | str
                try:
                    answer = requests.get(
                        poll_url, headers={"Authorization": f"Token {run_token}"},
                        timeout=POLL_TIMEOUT_S + 60,
                    ).status_code  # fmt: skip
                except requests.RequestException as exc:
                    answer = type(exc).__name__
                with lock:
                    results.append(answer)

            started = time.monotonic()
            threads = [threading.Thread(target=poll, daemon=True) for _ in range(POLLS)]
            for thread in threads:
                thread.start()
            time.sleep(3)  # every poll sent
            http = _dashboard_session(url)
            page_ms: list[float] = []
            api_ms: list[float] = []
            failures = 0
            for _ in range(DASHBOARD_REQUESTS):
                for target, into, headers in (
                    (f"{url}/", page_ms, {}),
                    (f"{url}/api/v1/experiments/", api_ms, auth),
                ):
                    began = time.perf_counter()
                    try:
                        ok = http.get(target, headers=headers, timeout=30).status_code == 200
                    except requests.RequestException:
                        ok = False
                    into.append((time.perf_counter() - began) * 1000)
                    failures += not ok
                time.sleep(0.05)
            for thread in threads:
                thread.join(POLL_TIMEOUT_S + 90)
            held = sum(1 for r in results if r == 200)
            return {
                f"{label}_polls_answered_200": held,
                f"{label}_polls_failed": POLLS - held,
                f"{label}_poll_errors": sorted({str(r) for r in results if r != 200}),
                f"{label}_polls_wall_s": round(time.monotonic() - started, 1),
                f"{label}_dashboard_page_p50_ms": round(percentile(page_ms, 0.5), 1),
                f"{label}_dashboard_page_p95_ms": round(percentile(page_ms, 0.95), 1),
                f"{label}_api_list_p50_ms": round(percentile(api_ms, 0.5), 1),
                f"{label}_api_list_p95_ms": round(percentile(api_ms, 0.95), 1),
                f"{label}_dashboard_failures": failures,
            }
    finally:
        backend.cleanup()


def main() -> None:
    kinds: list[tuple[type[Server], str]] = [(GunicornServer, "gunicorn_gthread")]
    # Tiny mode: gunicorn (what serve runs) only.
    if os.environ.get("BENCH_SERVERS", "gunicorn" if tiny() else "all") == "all":
        kinds.append((RunServer, "runserver"))
        # Optional (not a dependency): measured when installed.
        if importlib.util.find_spec("uvicorn") is not None:
            kinds.append((UvicornServer, "uvicorn"))
        else:
            print("note: uvicorn is not installed; not measured")
    figures: dict = {
        "polls": POLLS,
        "poll_timeout_s": POLL_TIMEOUT_S,
        "dashboard_requests": DASHBOARD_REQUESTS,
    }
    for server_cls, label in kinds:
        try:
            figures.update(measure(server_cls, label))
        except Exception as exc:  # one server failing to start is a result, not the end
            figures[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"{label} done", file=sys.stderr)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
