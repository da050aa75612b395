"""``/metrics`` under the shipped config/gunicorn.py: request series summed over its worker
processes (prometheus_client's multiprocess mode), whichever process answers the scrape, and
the master's metrics folder removed when it exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import REPO, free_port, serves_headway, wait_for

TOKEN = "multiprocess-" + "t" * 24
REQUESTS = 30


def _get(url: str, token: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Connection": "close"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with direct.open(request, timeout=30) as response:
        return response.read()


def _healthz_count(body: bytes) -> float:
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "headway_http_request_duration_seconds_count" and sample.labels == {
                "method": "GET",
                "route": "healthz",
            }:
                return sample.value
    return 0.0


def _gunicorn(tmp_path: Path, database_url: str, **extra: str) -> tuple[subprocess.Popen, str]:
    """gunicorn with config/gunicorn.py (2 workers) serving Headway on ``database_url``;
    returns the process and its URL."""
    port = free_port()
    env = {
        **os.environ,
        "HEADWAY_VAR_DIR": str(tmp_path / "var"),
        "SECRET_KEY": "multiprocess-test-" + "k" * 40,
        "HEADWAY_METRICS_TOKEN": TOKEN,
        "HEADWAY_WEB_WORKERS": "2",
        "HEADWAY_WEB_THREADS": "4",
        "DATABASE_URL": database_url,
        **extra,
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("REDIS_URL", None)
    command = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
    ]  # fmt: skip
    with open(tmp_path / "gunicorn.log", "wb") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen, tmp_path: Path) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    print((tmp_path / "gunicorn.log").read_text()[-3000:])


def test_request_series_are_summed_over_gunicorn_workers(tmp_path):
    # SELECT 1 needs no tables: an empty SQLite file is enough for /healthz and the scrape.
    proc, url = _gunicorn(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite3'}")
    var = tmp_path / "var"
    folder = var / "prometheus" / f"gunicorn-{proc.pid}"
    try:
        wait_for(lambda: serves_headway(url), 90, "gunicorn to answer /healthz")
        before = _healthz_count(_get(f"{url}/metrics", TOKEN))
        for _ in range(REQUESTS):
            _get(f"{url}/healthz")
        print(
            "processes that counted:",
            sorted({f.stem.rsplit("_", 1)[-1] for f in folder.glob("*.db")}),
        )
        # Each scrape, on its own connection, may be answered by either worker: all agree.
        counts = {_healthz_count(_get(f"{url}/metrics", TOKEN)) for _ in range(6)}
        assert counts == {before + REQUESTS}
    finally:
        _stop(proc, tmp_path)
    assert not folder.exists()


def _scrape(url: str) -> dict[str, float]:
    families = text_string_to_metric_families(_get(f"{url}/metrics", TOKEN).decode())
    return {f"{s.name}{sorted(s.labels.items())}": s.value for f in families for s in f.samples}


def test_with_the_database_down_healthz_is_503_and_metrics_still_answer(tmp_path):
    """A PostgreSQL nothing listens for: /healthz tells the load balancer (503, Retry-After);
    the scrape token needs no database, so /metrics answers and says which component is down."""
    # A database check waits for a pooled connection at most the pool's timeout: 1 s here.
    dead = f"postgres://headway@127.0.0.1:{free_port()}/none"
    proc, url = _gunicorn(tmp_path, dead, HEADWAY_DB_POOL_TIMEOUT_SECONDS="1")
    try:
        wait_for(lambda: _answers(f"{url}/metrics"), 90, "gunicorn to answer /metrics")
        with pytest.raises(urllib.error.HTTPError) as healthz:
            _get(f"{url}/healthz")
        assert healthz.value.code == 503
        assert int(healthz.value.headers["Retry-After"]) > 0
        samples = _scrape(url)
        assert samples["headway_component_up[('component', 'database')]"] == 0
        assert samples["headway_component_up[('component', 'broker')]"] == 1
        assert not any(name.startswith("headway_pool_slots") for name in samples)
    finally:
        _stop(proc, tmp_path)


def _answers(url: str) -> bool:
    try:
        _get(url, TOKEN)
    except OSError:
        return False
    return True
