"""schemathesis against a live server: ``--checks all``, every phase (stateful included), 0
failures (the security review's "Fuzzing in the suite"), plus the findings it made, each reproduced.

The run is the CLI a user would type (the command is recorded in docs/security.md) against a
real server process on a fresh database of the suite's kind (PostgreSQL in CI, else SQLite),
authenticated with a user token, with one experiment created first so the stateful phase has
objects to chain. Per-operation exceptions
for documented behaviours live, commented, in ``tests/fuzz/schemathesis.toml``.
``HEADWAY_FUZZ_EXAMPLES`` sets the examples per operation (default 10, few: the test is in
``make test``; the coverage phase still tries every operation's boundaries and the stateful phase
its links, and deeper runs raise it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

from bench._server import Backend, Server, postgres_recreate, single_file_model_definition
from tests.helpers import REPO

EXAMPLES = int(os.environ.get("HEADWAY_FUZZ_EXAMPLES", "10"))
SEED = 1
CONFIG = {
    "name": "fuzz",
    "entrypoint": "model_def:T",
    "hyperparameters": {"global_batch_size": 8},
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
}


def schemathesis_command(url: str, token: str, report_dir) -> list[str]:
    """The schemathesis CLI run of this test (``st ...`` with the same arguments)."""
    return [
        sys.executable, "-m", "schemathesis.cli",
        "--config-file", str(REPO / "tests" / "fuzz" / "schemathesis.toml"),
        "run", f"{url}/api/v1/schema/",
        "--header", f"Authorization: Token {token}",
        # No `--checks all`: schemathesis 4 runs every check by default, and the CLI flag would
        # re-enable the per-operation exceptions of the config file for every operation.
        # test_the_config_enables_every_check proves every check is on.
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(EXAMPLES),
        "--seed", str(SEED),
        "--workers", "1",
        "--report", "ndjson",
        "--report-dir", str(report_dir),
    ]  # fmt: skip


def fuzz_backend(name: str = "fuzz") -> Backend:
    """The suite's database kind: a fresh PostgreSQL database beside ``DATABASE_URL``'s (named
    ``<its name>_<name>_<xdist worker>``; CI) when it names PostgreSQL, else a fresh SQLite
    file (the second audit found failures on PostgreSQL that SQLite never shows, e.g. NUL
    characters). Each xdist worker has its own: a module's tests may run on both at once, and
    recreating one shared name dropped the other worker's database under its server."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return Backend.sqlite()
    parts = urlsplit(url)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    fuzz_url = urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}_{name}_{worker}"))
    why = postgres_recreate(fuzz_url)
    if why is not None:
        pytest.fail(f"cannot create the fuzzing database {fuzz_url}: {why}")
    return Backend.postgres(fuzz_url)


@pytest.fixture(scope="module")
def server():
    """A server process on a fresh database (``fuzz_backend``): ``(url, user token)``."""
    backend = fuzz_backend()
    backend.env["SECRET_KEY"] = "fuzz-test-" + "k" * 40
    token = backend.prepare("fuzz")
    try:
        with Server(backend) as live:
            yield live.url, token
    finally:
        backend.cleanup()


def _api(server) -> requests.Session:
    http = requests.Session()
    http.headers["Authorization"] = f"Token {server[1]}"
    return http


def _experiment(server) -> int:
    model = single_file_model_definition("model_def.py", "class T:\n    pass\n")
    body = {"config": CONFIG, "model_definition": model}
    created = _api(server).post(f"{server[0]}/api/v1/experiments/", json=body, timeout=60)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def _trial(server) -> int:
    url = f"{server[0]}/api/v1/experiments/{_experiment(server)}/trials/"
    return _api(server).get(url, timeout=60).json()["results"][0]["id"]


@pytest.mark.slow
def test_schemathesis_all_checks_and_stateful_find_no_failure(server, tmp_path):
    _experiment(server)
    proc = subprocess.run(
        schemathesis_command(*server, tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-20000:]
    summary = output[output.find("SUMMARY") :]
    assert "Stateful" in summary and "⏭  Stateful" not in summary, summary
    events = [json.loads(line) for line in (tmp_path / next(iter(os.listdir(tmp_path)))).open()]
    assert events, "schemathesis wrote no events"


def test_the_config_enables_every_check_outside_its_commented_exceptions():
    from schemathesis.config import SchemathesisConfig
    from schemathesis.config._checks import _BUILTIN_CHECK_NAMES

    config = SchemathesisConfig.from_path(str(REPO / "tests" / "fuzz" / "schemathesis.toml"))
    checks = config.projects.default.checks_config_for()
    # max_response_time needs a limit: no timing assertions in this suite (house rule).
    disabled = {n for n in _BUILTIN_CHECK_NAMES if not checks.get_by_name(name=n).enabled}
    assert disabled == {"max_response_time"}


# Regression tests of the findings, each reproducing the request schemathesis made.


def test_finding_non_integer_trial_id_is_a_json_404_not_a_500(server):
    http = _api(server)
    for path in ("trials/null,null/", "trials/abc/checkpoints/", "trials/1.5/kill/"):
        method = http.post if path.endswith("kill/") else http.get
        response = method(f"{server[0]}/api/v1/{path}", timeout=60)
        assert response.status_code == 404, (path, response.text)
        assert response.headers["Content-Type"] == "application/json"
    # A route whose converter refuses the id: Django's 404, answered as JSON under /api/.
    response = http.get(f"{server[0]}/api/v1/trials/abc/metrics.csv", timeout=60)
    assert response.status_code == 404
    assert response.json()["detail"] == "Not found."


def test_finding_huge_or_malformed_limit_is_a_400_naming_it(server):
    http = _api(server)
    for query in ("limit=100000000000000000000000", "limit=0", "limit=1_0", "offset=-1"):
        response = http.get(f"{server[0]}/api/v1/experiments/?{query}", timeout=60)
        assert response.status_code == 400, (query, response.text)
        assert set(response.json()["errors"]) == {query.split("=")[0]}
    assert http.get(f"{server[0]}/api/v1/experiments/?limit=1000", timeout=60).status_code == 200


def test_finding_logs_and_checkpoint_post_answer_their_documented_shape(server):
    trial_id = _trial(server)
    http = _api(server)
    schema = http.get(f"{server[0]}/api/v1/schema/?format=json", timeout=60).json()
    logs = http.get(f"{server[0]}/api/v1/trials/{trial_id}/logs/", timeout=60).json()
    log_schema = schema["paths"]["/api/v1/trials/{id}/logs/"]["get"]["responses"]["200"]
    ref = log_schema["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(logs) == set(schema["components"]["schemas"][ref]["properties"])
    post = schema["paths"]["/api/v1/trials/{id}/checkpoints/"]["post"]["responses"]
    for code in ("200", "201"):
        ref = post[code]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/Checkpoint"), ref


def test_finding_empty_metric_batch_is_accepted_not_a_500(server):
    trial_id = _trial(server)
    url = f"{server[0]}/api/v1/trials/{trial_id}/metrics/"
    response = _api(server).post(url, json={"reports": []}, timeout=60)
    assert response.status_code == 200 and response.json() == {"accepted": 0}


def test_finding_checkpoint_size_over_64_bits_is_a_400_not_a_500(server):
    trial_id = _trial(server)
    body = {
        "uuid": "b73326a3-3d59-36ba-861b-2fb9c891ac71",
        "steps_completed": 0,
        "resources": {"state-dict.pth": 332909943032351559778304},
    }
    url = f"{server[0]}/api/v1/trials/{trial_id}/checkpoints/"
    response = _api(server).post(url, json=body, timeout=60)
    assert response.status_code == 400 and "resources.state-dict.pth" in response.json()["errors"]


def test_finding_options_is_a_405_not_a_500(server):
    response = _api(server).options(f"{server[0]}/api/v1/models/", timeout=60)
    assert response.status_code == 405


def test_finding_models_refuse_numbers_for_text_and_flags(server):
    http = _api(server)
    created = http.post(f"{server[0]}/api/v1/models/", json={"name": "m", "description": 0})
    assert created.status_code == 400 and "description" in created.json()["errors"]
    assert http.post(f"{server[0]}/api/v1/models/", json={"name": "m"}).status_code == 201
    patched = http.patch(f"{server[0]}/api/v1/models/m/", json={"archived": 0}, timeout=60)
    assert patched.status_code == 400 and "archived" in patched.json()["errors"]


def test_finding_max_length_over_64_bits_is_a_400_not_a_500(server):
    trial_id = _trial(server)
    url = f"{server[0]}/api/v1/trials/{trial_id}/continue/"
    response = _api(server).post(url, json={"max_length": 327383979503205950160896}, timeout=60)
    assert response.status_code == 400 and "max_length" in response.json()["errors"]
    config = {**CONFIG, "searcher": {**CONFIG["searcher"], "max_length": {"batches": 2**64}}}
    created = _api(server).post(
        f"{server[0]}/api/v1/experiments/",
        json={"config": config, "model_definition": single_file_model_definition("m.py", "")},
        timeout=60,
    )
    assert created.status_code == 400
    assert any("searcher.max_length" in field for field in created.json()["errors"])


def test_finding_searcher_length_and_metric_steps_over_64_bits_are_400s(server):
    trial_id = _trial(server)
    http, base = _api(server), f"{server[0]}/api/v1/trials/{trial_id}"
    done = http.post(f"{base}/searcher/completed/", json={"length": 2**65, "metric": 1.0})
    assert done.status_code == 400 and "length" in done.json()["errors"]
    report = {"group": "training", "steps_completed": 2**64, "metrics": {"loss": 1.0}}
    posted = http.post(f"{base}/metrics/", json={"reports": [report]}, timeout=60)
    assert posted.status_code == 400 and "reports[0].steps_completed" in posted.json()["errors"]


def test_finding_form_encoded_bodies_are_a_415(server):
    trial_id = _trial(server)
    url = f"{server[0]}/api/v1/trials/{trial_id}/continue/"
    response = _api(server).post(url, data={"max_length": "true"}, timeout=60)
    assert response.status_code == 415


def test_finding_empty_or_unknown_query_values_are_400s_not_defaults(server):
    trial_id = _trial(server)
    http, base = _api(server), f"{server[0]}/api/v1"
    for path, name in [
        (f"trials/{trial_id}/metrics/?x_min=", "x_min"),
        (f"trials/{trial_id}/metrics/?x_axis=", "x_axis"),
        (f"trials/{trial_id}/checkpoints/?order_by=", "order_by"),
        ("experiments/?archived=yes", "archived"),
        ("experiments/?state=", "state"),
        ("experiments/?offset=", "offset"),
        ("models/?archived=", "archived"),
    ]:
        response = http.get(f"{base}/{path}", timeout=60)
        assert response.status_code == 400, (path, response.text)
        assert name in response.json()["errors"], (path, response.text)


def test_finding_repeated_single_value_query_parameters_are_400s_naming_them(server):
    # ?limit=1&limit=2 is an array where the schema says one integer: taking the last value
    # accepted a request the schema calls invalid (and ignored the other value).
    trial_id = _trial(server)
    http, base = _api(server), f"{server[0]}/api/v1"
    for path, name in [
        ("experiments/?limit=1&limit=2", "limit"),
        ("experiments/?offset=0&offset=0", "offset"),
        ("experiments/?archived=true&archived=false", "archived"),
        ("models/?archived=true&archived=true", "archived"),
        ("models/?label=a&label=b", "label"),
        (f"trials/{trial_id}/metrics/?x_axis=batches&x_axis=epochs", "x_axis"),
        (f"trials/{trial_id}/metrics/?band=true&band=true", "band"),
        (f"trials/{trial_id}/metrics/?group=training&group=validation", "group"),
        (f"trials/{trial_id}/checkpoints/?state=COMPLETED&state=DELETED", "state"),
    ]:
        response = http.get(f"{base}/{path}", timeout=60)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["errors"] == {name: ["Give one value, not 2."]}, path
    # A repeatable parameter still takes every value.
    many = http.get(f"{base}/trials/{trial_id}/metrics/?name=a&name=b", timeout=60)
    assert many.status_code == 200, many.text


def test_finding_the_experiment_body_schema_says_what_the_server_takes(server):
    http, url = _api(server), f"{server[0]}/api/v1/experiments/"
    schema = http.get(f"{server[0]}/api/v1/schema/?format=json", timeout=60).json()
    body = schema["components"]["schemas"]["ExperimentCreate"]
    assert body["additionalProperties"] is False
    assert {option["type"] for option in body["properties"]["config"]["anyOf"]} == {
        "object",
        "string",
    }
    model = single_file_model_definition("model_def.py", "class T:\n    pass\n")
    for bad, field in [
        ({"config": None, "model_definition": model}, "config"),
        ({"config": CONFIG, "model_definition": "0"}, "model_definition"),
        ({"config": CONFIG, "model_definition": 0}, "model_definition"),
        ({"config": CONFIG, "model_definition": model, "errors": {}}, "errors"),
    ]:
        response = http.post(url, json=bad, timeout=60)
        assert response.status_code == 400 and field in response.json()["errors"], response.text


def test_finding_a_model_version_name_must_be_text(server):
    http, base = _api(server), f"{server[0]}/api/v1/models"
    assert http.post(f"{base}/", json={"name": "textnames"}, timeout=60).status_code == 201
    body = {"checkpoint_uuid": "e3e70682-c209-1cac-a29f-6fbed82c07cd", "name": 0}
    response = http.post(f"{base}/textnames/versions/", json=body, timeout=60)
    assert response.status_code == 400 and "name" in response.json()["errors"], response.text


def test_finding_checkpoint_files_are_bounded_in_the_schema_and_their_sum_described(server):
    trial_id = _trial(server)
    http = _api(server)
    schema = http.get(f"{server[0]}/api/v1/schema/?format=json", timeout=60).json()
    resources = schema["components"]["schemas"]["CheckpointRegister"]["properties"]["resources"]
    assert resources["maxProperties"] > 0
    post = schema["paths"]["/api/v1/trials/{id}/checkpoints/"]["post"]
    assert "add up to at most 2^63-1" in post["description"]
    body = {
        "uuid": "c73326a3-3d59-36ba-861b-2fb9c891ac71",
        "steps_completed": 0,
        "resources": {"a.pth": 2**63 - 1, "b.pth": 1},
    }
    url = f"{server[0]}/api/v1/trials/{trial_id}/checkpoints/"
    response = http.post(url, json=body, timeout=60)
    assert response.status_code == 400 and "resources" in response.json()["errors"], response.text
