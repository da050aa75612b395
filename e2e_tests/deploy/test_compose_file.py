"""docker-compose.yml, read as YAML (no Docker needed): what reaches what, and the secrets.

Findings: "Trials reach gunicorn directly in the compose deployment, bypassing nginx", and
"SECRET_KEY falls back to `change-me-in-production` and the MinIO console is published on all
interfaces with its default credentials". Compose puts a service without ``networks`` on
``default``; two services can connect when they share a network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from urllib.parse import urlsplit

import yaml

from tests.helpers import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: dict = COMPOSE["services"]
WEB = {name for name, s in SERVICES.items() if s.get("command") == ["web"]}
# What runs host agents, and so trials: `worker` (beside the master) and `agent` (elsewhere).
HOST_FACING = {name for name, s in SERVICES.items() if s.get("command") in (["worker"], ["agent"])}


def _networks(name: str) -> set[str]:
    found = SERVICES[name].get("networks") or ["default"]
    return set(found if isinstance(found, list) else found.keys())


def _environment(name: str) -> dict[str, str]:
    env = SERVICES[name].get("environment") or {}
    assert isinstance(env, dict), f"{name}: environment as a mapping"
    return {k: str(v) for k, v in env.items()}


def test_the_web_servers_and_the_host_facing_services_share_no_network():
    assert {"web1", "web2"} == WEB and {"worker"} == HOST_FACING
    for host in HOST_FACING:
        for web in WEB:
            shared = _networks(host) & _networks(web)
            assert not shared, f"{host} reaches {web} directly over {shared}"
        # It reaches the master through the proxy, on a network they share.
        assert _networks(host) & _networks("proxy")
        assert urlsplit(_environment(host)["HEADWAY_MASTER_URL"]).hostname == "proxy"


def test_no_service_but_the_proxy_is_given_a_web_servers_url():
    for name in SERVICES:
        if name == "proxy":
            continue
        for key, value in _environment(name).items():
            assert not re.search(r"\bweb\d+\b", value), f"{name}: {key}={value}"


def test_compose_requires_a_secret_key_and_minio_credentials_without_defaults():
    for name in (*WEB, *HOST_FACING, "master", "migrate", "bucket"):
        env = _environment(name)
        assert env["SECRET_KEY"].startswith("${SECRET_KEY:?"), env["SECRET_KEY"]
        assert env["AWS_ACCESS_KEY_ID"].startswith("${MINIO_ROOT_USER:?")
        assert env["AWS_SECRET_ACCESS_KEY"].startswith("${MINIO_ROOT_PASSWORD:?")
    minio = _environment("minio")
    assert minio["MINIO_ROOT_USER"].startswith("${MINIO_ROOT_USER:?")
    assert minio["MINIO_ROOT_PASSWORD"].startswith("${MINIO_ROOT_PASSWORD:?")
    text = (REPO / "docker-compose.yml").read_text(encoding="utf-8")
    assert "change-me" not in text and "minioadmin" not in text


def test_minio_is_published_on_loopback_only():
    for port in SERVICES["minio"].get("ports", []):
        assert str(port).startswith("127.0.0.1:"), port


def test_the_bucket_step_refuses_minios_default_root_account(tmp_path):
    """The one Headway step that uses S3 credentials without Django's settings refuses them
    too (before any request: no S3 server here)."""
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        AWS_ACCESS_KEY_ID="minioadmin",
        AWS_SECRET_ACCESS_KEY="minioadmin",
        HEADWAY_S3_ENDPOINT_URL="http://127.0.0.1:9",
    )
    proc = subprocess.run(
        ["sh", str(REPO / "deploy" / "entrypoint.sh"), "bucket", "checkpoints"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "MinIO's default root account" in proc.stderr
