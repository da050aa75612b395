"""A real OpenID Connect provider (tests/oidc/provider.mjs: the certified ``oidc-provider``
from npm, installed by ``make install``) for the single sign-on tests, and Headway's settings
pointed at it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from config.sso import OIDCSettings
from tests.helpers import REPO, free_port, require, wait_for

PROVIDER = REPO / "tests" / "oidc"
CLIENT_ID = "headway-test"
CLIENT_SECRET = "headway-test-secret-of-enough-length"


class Provider:
    """The running provider: ``issuer``, and ``set_groups`` for the next sign-ins."""

    def __init__(self, issuer: str, groups_file: Path) -> None:
        self.issuer = issuer
        self.groups_file = groups_file

    def set_groups(self, groups: dict[str, list[str]]) -> None:
        """Each login name's ``groups`` claim from the next sign-in on."""
        self.groups_file.write_text(json.dumps(groups))


@pytest.fixture
def oidc_provider(live_server, tmp_path, settings):
    """Start the provider with a client whose redirect URI is the live server's callback,
    and configure Headway's single sign-on to use it (admins: group ``headway-admins``)."""
    node = shutil.which("node")
    require(node is not None, "single sign-on tests need Node.js (`node`)")
    require(
        (PROVIDER / "node_modules" / "oidc-provider").is_dir(),
        "single sign-on tests need `npm ci --prefix tests/oidc` (make install runs it)",
    )
    port = free_port()
    groups_file = tmp_path / "groups.json"
    groups_file.write_text("{}")
    log = open(tmp_path / "provider.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [node, str(PROVIDER / "provider.mjs")],
        env=dict(
            os.environ,
            OIDC_PORT=str(port),
            OIDC_CLIENT_ID=CLIENT_ID,
            OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_REDIRECT_URI=f"{live_server.url}/accounts/sso/callback/",
            OIDC_GROUPS_FILE=str(groups_file),
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    issuer = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).ok
        except requests.RequestException:
            return process.poll() is not None  # exited: fail below, not after the timeout

    try:
        wait_for(answers, 30, "the OpenID Connect provider to answer")
        assert process.poll() is None, (tmp_path / "provider.log").read_text()
        settings.HEADWAY_OIDC = OIDCSettings(
            issuer=issuer,
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            scopes="openid email profile groups",
            username_claim="preferred_username",
            groups_claim="groups",
            admin_groups=frozenset({"headway-admins"}),
            name="Test IdP",
        )
        yield Provider(issuer, groups_file)
    finally:
        process.terminate()
        process.wait(10)
        log.close()
