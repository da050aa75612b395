"""Regression tests for the second audit's "no 500 left" findings: each request the audit made,
answered as a JSON 4xx naming the field (or accepted). They run on the suite's database: PostgreSQL
in CI (where NUL characters, NaN in ``jsonb`` and time zone offsets past 15:59 failed), SQLite
locally.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from headway.metric_values import MAX_TEXT_CHARS
from tests.helpers import TINY_MODEL, b64, create_experiment

pytestmark = pytest.mark.django_db

TINY = {
    "name": "t",
    "entrypoint": "model_def:TinyTrial",
    "hyperparameters": {"global_batch_size": 8},
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 10}},
}


def post_json(api, url: str, text: str):
    """POST ``text`` as is (bare NaN literals, huge integers, deep nesting)."""
    return api.post(url, text, content_type="application/json")


def assert_400_naming(response, field: str) -> dict:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert field in body["errors"], body
    return body


def experiment_body(config_json: str) -> str:
    return f'{{"config": {config_json}, "model_definition": "{b64(TINY_MODEL)}"}}'


# --- configs ----------------------------------------------------------------------------------


def test_config_nested_100000_deep_is_400(api):
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    response = post_json(api, "/api/v1/experiments/", experiment_body(deep))
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "nested too deeply" in response.json()["detail"]
    yaml_text = "a: " + "[" * 100_000 + "]" * 100_000
    assert_400_naming(create_experiment(api, config=yaml_text), "config")


def test_config_nested_500_deep_under_the_parser_limit_is_400(api):
    # Python's JSON parser takes it; validation recursed per level (pydantic's recursion guard).
    text = json.dumps({**TINY, "hyperparameters": {"x": "HP"}})
    text = text.replace('"HP"', '{"type": "const", "val": ' + "[" * 500 + "]" * 500 + "}")
    body = assert_400_naming(
        post_json(api, "/api/v1/experiments/", experiment_body(text)), "config"
    )
    assert "levels deep" in body["errors"]["config"][0]


def test_log_hparam_maxval_1000_is_400(api):
    config = {**TINY, "hyperparameters": {"lr": {"type": "log", "minval": -3, "maxval": 1000}}}
    response = create_experiment(api, config=json.dumps(config))
    assert_400_naming(response, "config.hyperparameters.lr.maxval")
    base_half = {"type": "log", "base": 0.5, "minval": -2000, "maxval": 1}
    response = create_experiment(
        api, config=json.dumps({**TINY, "hyperparameters": {"x": base_half}})
    )
    assert_400_naming(response, "config.hyperparameters.x.minval")


def test_nul_in_config_text_is_400(api):
    # A YAML "\0" escape, and NUL in a JSON config's strings and keys.
    yaml_text = json.dumps(TINY).replace('"name": "t"', '"name": "a\\0b"')
    assert_400_naming(create_experiment(api, config=yaml_text), "config")
    for hparams in ({"x": "a\u0000"}, {"y\u0000": 1}):
        body = {"config": {**TINY, "hyperparameters": hparams}, "model_definition": b64(TINY_MODEL)}
        assert_400_naming(api.post("/api/v1/experiments/", body, format="json"), "config")


# --- metric reads -----------------------------------------------------------------------------


@pytest.mark.parametrize("param", ["name", "group"])
def test_nul_in_metric_name_and_group_query_is_400(api, trial, param):
    for url in (
        f"/api/v1/trials/{trial.id}/metrics/",
        f"/api/v1/experiments/{trial.experiment_id}/metrics/",
        f"/api/v1/trials/{trial.id}/metrics.csv",
    ):
        assert_400_naming(api.get(f"{url}?{param}=a%00b"), param)


def test_csv_export_checks_its_parameters_before_streaming(api, trial):
    # Once the 200 is out, an error can only cut the stream: every check comes first.
    response = api.get(f"/api/v1/trials/{trial.id}/metrics.csv?name=ok&name=a%00")
    assert response.status_code == 400 and not response.streaming
    assert api.get("/api/v1/trials/999999/metrics.csv").status_code == 404
    report = {"group": "training", "steps_completed": 1, "metrics": {"loss": [float("nan")]}}
    posted = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": [report]}, format="json")
    assert posted.status_code == 200
    response = api.get(f"/api/v1/trials/{trial.id}/metrics.csv")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert response.status_code == 200 and lines[1].startswith('training,loss,1,"[""NaN""]"')


# --- JSON fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"name": "m", "metadata": {"a": "x\\u0000"}}', "metadata"),
        ('{"name": "m", "metadata": {"a\\u0000": 1}}', "metadata"),
        ('{"name": "m", "metadata": {"a": NaN}}', "metadata"),
        ('{"name": "m", "labels": ["x\\u0000"]}', "labels.0"),
        ('{"name": "m", "description": "x\\u0000"}', "description"),
    ],
)
def test_nul_or_nan_in_model_metadata_and_labels_is_400(api, body, field):
    assert_400_naming(post_json(api, "/api/v1/models/", body), field)


def test_nul_in_model_version_and_checkpoint_metadata_is_400(api, trial):
    from tests.helpers import register_checkpoint

    assert api.post("/api/v1/models/", {"name": "m"}, format="json").status_code == 201
    checkpoint = register_checkpoint(trial)
    version = {"checkpoint_uuid": str(checkpoint.uuid), "metadata": {"a": "\u0000"}}
    response = api.post("/api/v1/models/m/versions/", version, format="json")
    assert_400_naming(response, "metadata")
    body = f'{{"uuid": "{checkpoint.uuid}", "steps_completed": 1, "resources": {{}},'
    response = post_json(
        api, f"/api/v1/trials/{trial.id}/checkpoints/", body + '"metadata": {"x": NaN}}'
    )
    assert_400_naming(response, "metadata")


def test_nul_or_nan_in_continue_hparams_is_400(api, trial):
    assert api.post(f"/api/v1/experiments/{trial.experiment_id}/pause/").status_code == 200
    url = f"/api/v1/trials/{trial.id}/continue/"
    for hparams in ('{"lr": "x\\u0000"}', '{"l\\u0000r": 0.01}', '{"lr": Infinity}'):
        assert_400_naming(post_json(api, url, f'{{"hparams": {hparams}}}'), "hparams")


# --- metric reports ---------------------------------------------------------------------------


def report_text(**fields: str) -> str:
    parts = {"group": '"training"', "steps_completed": "1", "metrics": '{"loss": 1.0}', **fields}
    return '{"reports": [{' + ", ".join(f'"{k}": {v}' for k, v in parts.items()) + "}]}"


def test_nested_nan_in_metric_report_is_stored_as_its_name(api, trial):
    text = report_text(metrics='{"loss": [NaN, {"a": Infinity, "b": -Infinity}]}')
    assert post_json(api, f"/api/v1/trials/{trial.id}/metrics/", text).status_code == 200
    from registry.models import MetricReport

    stored = MetricReport.objects.get(trial=trial).metrics["loss"]
    assert stored == ["NaN", {"a": "Infinity", "b": "-Infinity"}]


@pytest.mark.parametrize("epoch", ["NaN", "Infinity", "-Infinity", "1" + "0" * 400, "1e400"])
def test_nan_or_infinite_epoch_in_metric_report_is_400(api, trial, epoch):
    response = post_json(api, f"/api/v1/trials/{trial.id}/metrics/", report_text(epoch=epoch))
    assert_400_naming(response, "reports[0].epoch")


@pytest.mark.parametrize(
    "value", ["1" + "0" * 400, "[1" + "0" * 400 + "]", '{"a": -1' + "0" * 400 + "}"]
)
def test_integer_of_10_to_400_in_metric_report_is_400(api, trial, value):
    text = report_text(metrics=f'{{"loss": {value}}}')
    response = post_json(api, f"/api/v1/trials/{trial.id}/metrics/", text)
    assert_400_naming(response, "reports[0].metrics.loss")


@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59-23:00", "0001-01-01T00:00:00+23:00"])
def test_out_of_range_timestamp_in_metric_report_is_400(api, trial, stamp):
    response = post_json(
        api, f"/api/v1/trials/{trial.id}/metrics/", report_text(timestamp=f'"{stamp}"')
    )
    assert_400_naming(response, "reports[0].timestamp")


def test_timestamp_with_a_large_offset_is_stored_in_utc(api, trial):
    text = report_text(timestamp='"2024-01-02T03:04:05+20:00"')
    assert post_json(api, f"/api/v1/trials/{trial.id}/metrics/", text).status_code == 200
    from registry.models import MetricReport

    stamp = MetricReport.objects.get(trial=trial).reported_at
    assert stamp.isoformat().startswith("2024-01-01T07:04:05")


def test_string_metric_value_over_the_cap_is_400_naming_the_metric(api, trial):
    url = f"/api/v1/trials/{trial.id}/metrics/"
    ok = {"group": "training", "steps_completed": 1, "metrics": {"note": "x" * MAX_TEXT_CHARS}}
    assert api.post(url, {"reports": [ok]}, format="json").status_code == 200
    for value in (
        "x" * (MAX_TEXT_CHARS + 1),
        ["x" * 20_000_000],
        {"k": "y" * (MAX_TEXT_CHARS + 1)},
    ):
        report = {"group": "training", "steps_completed": 2, "metrics": {"note": value}}
        body = assert_400_naming(
            api.post(url, {"reports": [report]}, format="json"), "reports[0].metrics.note"
        )
        assert str(MAX_TEXT_CHARS) in body["detail"]


# --- concurrency ------------------------------------------------------------------------------


MANY_TRIALS = """
name: many
entrypoint: model_def:TinyTrial
hyperparameters:
  global_batch_size: 8
  lr: {type: log, minval: -3, maxval: -1}
searcher: {name: random, metric: validation_loss, max_trials: 4, max_length: {batches: 10}}
"""


@pytest.mark.django_db(transaction=True)
def test_concurrent_pause_and_metric_reports_do_not_deadlock(api):
    """Pauses, activations and reports at once: PostgreSQL answered "deadlock detected" (a 500)
    when ``FOR UPDATE`` over the trial-experiment join locked the experiment with the first
    trial, against the lock order (trials before their experiment). SQLite has one writer."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks and deadlocks are PostgreSQL's (SQLite has one writer)")
    from registry import lifecycle, metrics
    from registry.models import Trial

    experiment_id = create_experiment(api, config=MANY_TRIALS).json()["id"]
    trial_ids = list(Trial.objects.filter(experiment_id=experiment_id).values_list("id", flat=True))
    errors: list[str] = []

    def toggle() -> None:
        try:
            for i in range(8):
                control = (
                    lifecycle.experiment_pause if i % 2 == 0 else lifecycle.experiment_activate
                )
                try:
                    control(experiment_id=experiment_id)
                except Exception as exc:  # what a view would answer 500 for
                    errors.append(repr(exc))
        finally:
            connection.close()

    def report(trial_id: int) -> None:
        try:
            for step in range(1, 16):
                batch = {
                    "group": "validation",
                    "steps_completed": step,
                    "metrics": {"validation_loss": 1.0},
                }
                try:
                    metrics.metrics_report(
                        trial_id=trial_id, reports=metrics.parse_reports({"reports": [batch]})
                    )
                except Exception as exc:
                    errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=toggle) for _ in range(2)]
    threads += [threading.Thread(target=report, args=(t,)) for t in trial_ids[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# --- error answers ----------------------------------------------------------------------------


def test_every_api_error_is_json(api, trial, client):
    answers = {
        "unknown route": api.get("/api/v1/no-such-route/"),
        "unknown id": api.get("/api/v1/trials/999999/"),
        "wrong method": api.put(f"/api/v1/trials/{trial.id}/metrics/", {}, format="json"),
        "form body": api.post(f"/api/v1/trials/{trial.id}/continue/", {"a": "1"}),
        "malformed JSON": post_json(api, f"/api/v1/trials/{trial.id}/metrics/", "{"),
        "no token": client.get("/api/v1/experiments/"),
        "NUL parameter": api.get(f"/api/v1/trials/{trial.id}/metrics/?name=%00"),
    }
    for what, response in answers.items():
        assert response.status_code >= 400, what
        assert response["Content-Type"] == "application/json", (what, response.content[:200])
        assert "detail" in response.json(), what


def test_the_schema_documents_503_on_every_operation(api):
    # Any operation can meet a busy database: 503 + Retry-After (registry/overload.py).
    schema = api.get("/api/v1/schema/?format=json").json()
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert "503" in operation["responses"], (method, path)
