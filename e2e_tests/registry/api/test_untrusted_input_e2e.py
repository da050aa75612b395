"""Untrusted trial output on a live cluster (web server, Celery worker, Redis, and
PostgreSQL when ``DATABASE_URL`` names it): a NUL byte and a huge line on a trial's stdout."""

from __future__ import annotations

import pytest
import requests

from e2e_tests.test_end_to_end import headway_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = """
import sys
print("before")
sys.stdout.write("nul \\x00 byte\\n")
print("x" * 200_000)
print("after")
"""


def test_finding_postgresql_nul_on_trial_stdout_does_not_crash_loop_the_worker(
    cluster, cluster_token, tmp_path
):
    (tmp_path / "train.py").write_text(SCRIPT)
    config = tmp_path / "nul.yaml"
    config.write_text(
        "name: nul\nentrypoint: python train.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: loss, max_length: 10}\n"
    )
    created = headway_cli(
        cluster, cluster_token, "experiment", "create", str(config), str(tmp_path), "--follow"
    )
    assert created.returncode == 0, created.stdout + created.stderr
    session = requests.Session()
    session.headers["Authorization"] = f"Token {cluster_token}"
    experiment = session.get(f"{cluster.url}/api/v1/experiments/", timeout=30).json()["results"][0]
    (trial,) = session.get(
        f"{cluster.url}/api/v1/experiments/{experiment['id']}/trials/", timeout=30
    ).json()["results"]
    assert trial["state"] == "COMPLETED" and trial["restarts"] == 0
    lines = session.get(f"{cluster.url}/api/v1/trials/{trial['id']}/logs/", timeout=30).json()
    messages = [line["message"] for line in lines["results"]]
    start = messages.index("before")
    assert messages[start + 1] == "nul \ufffd byte"
    assert 65000 < len(messages[start + 2]) <= 65536  # the default HEADWAY_MAX_LOG_LINE_CHARS
    assert messages[start + 2].endswith(" characters cut]")
    assert messages[start + 3] == "after"
