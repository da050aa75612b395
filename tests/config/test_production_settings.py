"""Production settings (the security review's Low findings "a hard-coded default SECRET_KEY", "no
HSTS / secure cookies / CSP settings", "no login throttling")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from tests.helpers import REPO

PRINT_SETTINGS = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'key': s.SECRET_KEY, 'cookie': s.SESSION_COOKIE_SECURE, "
    "'csrf': s.CSRF_COOKIE_SECURE, 'hsts': s.SECURE_HSTS_SECONDS, "
    "'proxy': s.SECURE_PROXY_SSL_HEADER}))"
)


def _settings_in_subprocess(tmp_path, **env: str) -> subprocess.CompletedProcess:
    """Load config.settings in a fresh interpreter with ``env`` (and no pytest marker)."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "SECRET_KEY")}
    base.update(DJANGO_SETTINGS_MODULE="config.settings", HEADWAY_VAR_DIR=str(tmp_path), **env)
    base.pop("DATABASE_URL", None) if "DATABASE_URL" not in env else None
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=REPO, env=base, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_finding_hard_coded_default_secret_key_a_deployment_must_set_it(tmp_path):
    proc = _settings_in_subprocess(tmp_path, DATABASE_URL="postgres://u@127.0.0.1:1/none")
    assert proc.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY must be set" in proc.stderr


def test_finding_hard_coded_default_secret_key_the_embedded_setup_makes_a_random_one(tmp_path):
    first = json.loads(_settings_in_subprocess(tmp_path).stdout)["key"]
    again = json.loads(_settings_in_subprocess(tmp_path).stdout)["key"]
    other = json.loads(_settings_in_subprocess(tmp_path / "other").stdout)["key"]
    assert first == again != other  # kept in the var dir, different per installation
    assert len(first) >= 50 and "insecure" not in first
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


POSTGRES = "postgres://u@127.0.0.1:1/none"  # settings never connect: nothing listens there
MINIO_DEFAULTS = {"AWS_ACCESS_KEY_ID": "minioadmin", "AWS_SECRET_ACCESS_KEY": "minioadmin"}


@pytest.mark.parametrize("key", ["change-me-in-production", "django-insecure-abc123"])
@pytest.mark.parametrize("database", [POSTGRES, None])
def test_finding_default_secret_key_a_published_default_stops_start_up(tmp_path, key, database):
    env = {"SECRET_KEY": key} | ({"DATABASE_URL": database} if database else {})
    proc = _settings_in_subprocess(tmp_path, **env)
    assert proc.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is a published default" in proc.stderr


def test_finding_default_s3_credentials_stop_a_deployment_not_the_demo(tmp_path):
    key = "a-deployment-key-" + "k" * 40
    refused = _settings_in_subprocess(
        tmp_path, DATABASE_URL=POSTGRES, SECRET_KEY=key, **MINIO_DEFAULTS
    )
    assert refused.returncode != 0
    assert "ImproperlyConfigured: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are MinIO" in (
        refused.stderr
    )
    own = dict(MINIO_DEFAULTS, AWS_SECRET_ACCESS_KEY="a-password-of-its-own")
    deployed = _settings_in_subprocess(tmp_path, DATABASE_URL=POSTGRES, SECRET_KEY=key, **own)
    assert json.loads(deployed.stdout)["key"] == key
    # `make demo` (SQLite, the embedded key) may talk to a local MinIO with its defaults.
    demo = _settings_in_subprocess(tmp_path / "demo", **MINIO_DEFAULTS)
    assert demo.returncode == 0, demo.stderr


def test_finding_no_hsts_secure_cookies_behind_tls(tmp_path):
    plain = json.loads(_settings_in_subprocess(tmp_path).stdout)
    assert (plain["cookie"], plain["hsts"], plain["proxy"]) == (False, 0, None)
    tls = json.loads(_settings_in_subprocess(tmp_path, HEADWAY_TLS="true").stdout)
    assert tls["cookie"] and tls["csrf"] and tls["hsts"] == 31536000
    assert tls["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_finding_no_csp_every_page_sends_a_strict_policy(client):
    response = client.get("/accounts/login/")
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline' ;" not in policy
    script_src = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
    assert "unsafe" not in script_src
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_finding_no_login_throttling_the_right_password_after_many_wrong_ones_is_refused(
    client, django_user_model
):
    django_user_model.objects.create_user("victim", password="right-password")
    limit = django_settings.AXES_FAILURE_LIMIT
    for _ in range(limit):
        wrong = client.post("/accounts/login/", {"username": "victim", "password": "guess"})
        assert wrong.status_code in (200, 429)
    right = client.post("/accounts/login/", {"username": "victim", "password": "right-password"})
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session
    # The REST login is throttled by the same count.
    api = client.post(
        "/api/v1/auth/login/",
        {"username": "victim", "password": "right-password"},
        content_type="application/json",
    )
    assert api.status_code == 429 and "token" not in api.json()


@pytest.mark.django_db
def test_a_right_password_before_the_limit_logs_in_and_resets_the_count(client, django_user_model):
    django_user_model.objects.create_user("forgetful", password="right-password")
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        client.post("/accounts/login/", {"username": "forgetful", "password": "guess"})
    ok = client.post("/accounts/login/", {"username": "forgetful", "password": "right-password"})
    assert ok.status_code == 302 and "_auth_user_id" in client.session
