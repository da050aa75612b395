"""The production deployment, run on the build machine without Docker: ``deploy/entrypoint.sh``
(the script every container of docker-compose.yml runs) with ``migrate``, ``bucket``, ``web``
(gunicorn), ``master`` (its Celery worker) and ``agent`` (a host agent with only the master's
URL, a host token and the broker), on PostgreSQL + Redis + an S3 server (moto), then one experiment
trained end to end with S3 checkpoints and downloaded back through the web server."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import requests

from tests.helpers import REPO, b64, free_port, make_tar_gz, require, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ENTRYPOINT = str(REPO / "deploy" / "entrypoint.sh")
TRAIN = """
import headway
with headway.core.init() as ctx:
    ctx.train.report_validation_metrics(steps_completed=1, metrics={"loss": 0.25})
    with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id):
        (path / "weights.bin").write_bytes(b"w" * 1000)
"""


def _postgres_admin_url() -> str:
    """The server of the session's PostgreSQL (DATABASE_URL), else the local default."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgres://postgres@127.0.0.1:5432/postgres"
    return url.rsplit("/", 1)[0]


@pytest.fixture
def deployment(_moto_server, tmp_path):
    """Run migrate, bucket, web, master and a host agent (REST only, its own host token) from
    deploy/entrypoint.sh; yield (url, token, env)."""
    import psycopg
    import redis

    server = _postgres_admin_url()
    name = f"hw_deploy_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        require(False, f"the deployment test needs PostgreSQL at {server}: {exc}")
    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        require(False, f"the deployment test needs Redis at {redis_url}: {exc}")
    port = free_port()
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "DATABASE_URL": f"{server}/{name}",
        "REDIS_URL": redis_url,
        "SECRET_KEY": uuid.uuid4().hex * 2,
        "HEADWAY_PORT": str(port),
        "HEADWAY_BIND": "127.0.0.1",
        "HEADWAY_MASTER_URL": f"http://127.0.0.1:{port}",
        "HEADWAY_VAR_DIR": str(tmp_path / "var"),
        "HEADWAY_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "HEADWAY_QUEUE": f"deploy-{uuid.uuid4().hex[:8]}",
        "HEADWAY_HOST_NAME": f"deploy-{uuid.uuid4().hex[:8]}",
        "HEADWAY_SLOTS": "1",
        "HEADWAY_HOST_HEARTBEAT_SECONDS": "1",
        "HEADWAY_S3_ENDPOINT_URL": _moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "LOG_LEVEL": "WARNING",
    }
    bucket = f"deploy-{uuid.uuid4().hex[:8]}"
    # The admin's storage locations, as deploy/storage-locations.yaml names them for compose.
    locations = tmp_path / "storage-locations.yaml"
    locations.write_text(
        "default: shared\nlocations:\n"
        f"  shared: {{type: shared_fs, host_path: {tmp_path / 'checkpoints'}}}\n"
        f"  s3: {{type: s3, bucket: {bucket}, endpoint_url: '{_moto_server}'}}\n"
    )
    env["HEADWAY_STORAGE_LOCATIONS"] = str(locations)
    children: list[subprocess.Popen] = []
    try:
        for step in (["migrate"], ["bucket", bucket]):
            subprocess.run(
                [ENTRYPOINT, *step], env=env, check=True, capture_output=True, timeout=300
            )
        token = subprocess.run(
            [ENTRYPOINT, sys.executable, "manage.py", "headway_token", "deployer", "--create"],
            env=env, check=True, capture_output=True, text=True, timeout=120,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        host_key = subprocess.run(
            [ENTRYPOINT, sys.executable, "manage.py", "headway_host_token", env["HEADWAY_HOST_NAME"],
             "--create"],
            env=env, check=True, capture_output=True, text=True, timeout=120,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        # The GPU host's agent holds no database settings nor the secret key: only the master's
        # URL, its host token and the broker (an unreachable database proves it never opens it).
        host_env = {k: v for k, v in env.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
        host_env.update(
            DATABASE_URL="postgres://headway@10.255.255.1:5432/unreachable",
            HEADWAY_MASTER=env["HEADWAY_MASTER_URL"],
            HEADWAY_HOST_TOKEN=host_key,
            HEADWAY_VAR_DIR=str(tmp_path / "host-var"),
        )
        for role, role_env in (("web", env), ("master", env), ("agent", host_env)):
            log = open(tmp_path / f"{role}.log", "wb")  # noqa: SIM115 (the child's)
            children.append(
                subprocess.Popen(
                    [ENTRYPOINT, role],
                    env=role_env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        wait_for(
            lambda: subprocess.run([ENTRYPOINT, "healthcheck"], env=env).returncode == 0,
            90, "the web server's health check",
        )  # fmt: skip
        yield f"http://127.0.0.1:{port}", token, bucket, tmp_path
    finally:
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(child.pid, signal.SIGKILL)
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_containers_commands_train_an_experiment_with_s3_checkpoints(deployment):
    url, token, bucket, tmp_path = deployment
    http = requests.Session()
    http.headers["Authorization"] = f"Token {token}"
    config = (
        "name: deployed\nentrypoint: python train.py\nmax_restarts: 0\n"
        "searcher: {name: single, metric: loss, max_length: 1}\n"
        f"checkpoint_storage: {{type: s3, bucket: {bucket}}}\n"
    )
    created = http.post(
        f"{url}/api/v1/experiments/",
        json={"config": config, "model_definition": b64(make_tar_gz({"train.py": TRAIN}))},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    experiment = f"{url}/api/v1/experiments/{created.json()['id']}/"

    def done() -> str | None:
        state = http.get(experiment, timeout=10).json()["state"]
        return state if state in ("COMPLETED", "ERROR", "CANCELED") else None

    logs = lambda: (tmp_path / "agent.log").read_text(errors="replace")[-3000:]  # noqa: E731
    state = wait_for(done, 240, "the experiment to end")
    assert state == "COMPLETED", logs()
    trial = http.get(f"{experiment}trials/", timeout=10).json()["results"][0]
    assert trial["summary_metrics"]["validation"]["loss"]["last"] == 0.25
    download = http.get(
        f"{url}/api/v1/checkpoints/{trial['latest_checkpoint']}/download", timeout=30
    )
    assert download.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(download.content)) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("weights.bin"))
        assert tar.extractfile(member).read() == b"w" * 1000
    # The dashboard is served (static files collected by the web command) with its policy.
    page = http.get(f"{url}/static/js/confirm.js", timeout=10)
    assert page.status_code == 200
    assert "Content-Security-Policy" in http.get(f"{url}/accounts/login/", timeout=10).headers
