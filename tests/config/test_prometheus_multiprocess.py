"""``/metrics`` under the shipped config/gunicorn.py: request series summed over its worker
processes (prometheus_client's multiprocess mode), whichever process answers the scrape, and
the master's metrics folder removed when it exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

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


def test_request_series_are_summed_over_gunicorn_workers(tmp_path):
    port = free_port()
    var = tmp_path / "var"
    env = {
        **os.environ,
        "HEADWAY_VAR_DIR": str(var),
        "SECRET_KEY": "multiprocess-test-" + "k" * 40,
        "HEADWAY_METRICS_TOKEN": TOKEN,
        "HEADWAY_WEB_WORKERS": "2",
        "HEADWAY_WEB_THREADS": "4",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",  # SELECT 1 needs no tables
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("REDIS_URL", None)
    command = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
    ]  # fmt: skip
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
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
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        print(log.read_text()[-3000:])
    assert not folder.exists()
