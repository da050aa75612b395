"""schemathesis over the host agent's routes with a real host key: every check,
every phase, 0 failures.

``tests/registry/api/test_api_fuzz.py`` fuzzes the whole API with a user token, which the host routes refuse
(403) before reading a body; this run authenticates as a host, so the bodies, path ids and
answers of ``/api/v1/host-agent/`` are exercised for real: every answer documented, no 500. The
host is registered and one run is placed on it first, so some ids exist. Same command line and
configuration as the whole-API run, limited to the host routes.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import requests

from bench._server import Server, single_file_model_definition
from tests.helpers import REPO
from tests.registry.api.test_api_fuzz import CONFIG, fuzz_backend, schemathesis_command

EXAMPLES = os.environ.get("HEADWAY_FUZZ_EXAMPLES", "50")


@pytest.mark.slow
def test_schemathesis_finds_no_failure_on_the_host_routes(tmp_path):
    backend = fuzz_backend("hostfuzz")
    backend.env["SECRET_KEY"] = "host-fuzz-" + "k" * 40
    user_token = backend.prepare("fuzz")
    host_key = backend.manage("headway_host_token", "fuzz-host", "--create").strip()
    try:
        with Server(backend) as live:
            beat = {
                "pool": "default",
                "devices": ["cpu0"],
                "gpu": False,
                "started_at": "2026-01-01T00:00:00Z",
            }
            host = {"Authorization": f"Token {host_key}"}
            answer = requests.post(
                f"{live.url}/api/v1/host-agent/heartbeat/", json=beat, headers=host, timeout=60
            )
            assert answer.status_code == 200, answer.text
            model = single_file_model_definition("model_def.py", "class T:\n    pass\n")
            created = requests.post(
                f"{live.url}/api/v1/experiments/",
                json={"config": CONFIG, "model_definition": model},
                headers={"Authorization": f"Token {user_token}"},
                timeout=60,
            )
            assert created.status_code == 201, created.text
            # The schema needs a user's login (a host key gets 403 there): read it as the user,
            # fuzz as the host.
            schema = requests.get(
                f"{live.url}/api/v1/schema/?format=json",
                headers={"Authorization": f"Token {user_token}"},
                timeout=60,
            )
            (tmp_path / "schema.json").write_text(schema.text)
            command = schemathesis_command(live.url, host_key, tmp_path / "report")
            command[command.index(f"{live.url}/api/v1/schema/")] = str(tmp_path / "schema.json")
            command += ["--url", live.url]
            command[command.index("--max-examples") + 1] = EXAMPLES
            command += ["--include-path-regex", "/host-agent/"]
            proc = subprocess.run(
                command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False
            )
    finally:
        backend.cleanup()
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    assert "host-agent" in output, output[-5000:]
    # Every operation got past the host key, except possibly a run token route: once the
    # fuzzer reported the one placed run's exit, its token is refused (403) by design.
    block = output.split("403 Forbidden")[-1].split("\n\n")[0]  # the operations listed
    refused = re.findall(r"^\s*- (\w+ /api/v1/\S+)$", block, re.M)
    if "403 Forbidden" in output:
        assert refused and all(op.endswith("/token/") for op in refused), output[-9000:]
