"""The OpenAPI schema documents every operation's answer with its model.

An answer documented as a bare ``{"type": "object"}`` (``responses={200: dict}``) tells a client
nothing; plain-object answers are ``headway.client.wire`` models, which the server builds its JSON
from and the client parses (``registry.api.answers.answer``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from headway.client import wire
from registry.models import Trial
from tests.helpers import create_experiment

pytestmark = pytest.mark.django_db


def _schema(api) -> dict[str, Any]:
    response = api.get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _free_form(schema: dict[str, Any], node: dict[str, Any]) -> bool:
    """Whether ``node`` says only "some JSON object" (or a list of them)."""
    node = _resolved(schema, node)
    if node.get("type") == "array":
        return _free_form(schema, node.get("items", {}))
    if any(key in node for key in ("properties", "allOf", "oneOf", "anyOf")):
        return False
    return node.get("type") == "object" or not node


def test_every_operation_documents_its_answer_with_a_model(api) -> None:
    schema = _schema(api)
    bare = []
    checked = 0
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            ok = {c: r for c, r in operation["responses"].items() if c.startswith("2")}
            assert ok, (method, path)
            for code, response in ok.items():
                for media, content in response.get("content", {}).items():
                    checked += 1
                    if _free_form(schema, content.get("schema", {})):
                        bare.append(f"{method.upper()} {path} {code} {media}")
    assert bare == []
    assert checked > 50


def test_every_wire_model_component_has_the_models_fields(api) -> None:
    # A DRF serializer named like a wire model (``FooSerializer`` -> ``Foo``) would take its
    # component silently: the answer would be documented with the request's fields.
    components = _schema(api)["components"]["schemas"]
    models = {
        name: model
        for name, model in vars(wire).items()
        if isinstance(model, type) and issubclass(model, wire.WireModel) and name in components
    }
    assert {"TrialMetrics", "ExperimentMetrics", "OperationRecorded", "LoginAnswer"} <= set(models)
    for name, model in models.items():
        assert set(components[name].get("properties", {})) == set(model.model_fields), name


def _report(api, trial: Trial, reports: list[dict[str, Any]]) -> dict[str, Any]:
    response = api.post(f"/api/v1/trials/{trial.id}/metrics/", {"reports": reports}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"max_points": 10, "band": "true"},
        {"x_axis": "epochs"},
        {"x_axis": "time", "max_points": 10},
    ],
)
def test_metric_series_answers_are_their_models(api, params: dict[str, Any]) -> None:
    # The experiment overview is written by orjson without passing through its model (speed):
    # the model must still read it back unchanged, optional lists absent when not asked for.
    experiment_id = create_experiment(api).json()["id"]
    trial = Trial.objects.get(experiment_id=experiment_id)
    reports = [
        {
            "group": "training",
            "steps_completed": s,
            "metrics": {"loss": math.sin(s) if s % 7 else "NaN"},
            "epoch": s / 10,
        }
        for s in range(1, 60)
    ]
    assert wire.MetricsAccepted.model_validate(_report(api, trial, reports)).accepted == 59
    routes = [
        (wire.TrialMetrics, f"/api/v1/trials/{trial.id}/metrics/"),
        (wire.ExperimentMetrics, f"/api/v1/experiments/{experiment_id}/metrics/"),
    ]
    for model, url in routes:
        body = api.get(url, params).json()
        parsed = model.model_validate(body)
        assert parsed.model_dump(mode="json", exclude_unset=True) == body, url
        (series,) = parsed.series
        assert series.name == "loss" and None in series.values
        assert (series.min is not None) == ("band" in params)
        assert (series.epochs is not None) == (params.get("x_axis") == "epochs")
        assert (series.elapsed_seconds is not None) == (params.get("x_axis") == "time")


def test_optional_wire_fields_are_openapi_30_nullable(api) -> None:
    # OpenAPI 3.0 has no "null" type: pydantic's anyOf [X, null] is written as X, nullable.
    schema = _schema(api)

    def nulls(node: Any) -> int:
        if isinstance(node, dict):
            return (node.get("type") == "null") + sum(nulls(v) for v in node.values())
        if isinstance(node, list):
            return sum(nulls(v) for v in node)
        return 0

    components = schema["components"]["schemas"]
    assert nulls({name: components[name] for name in components if hasattr(wire, name)}) == 0
    assert components["OperationRecorded"]["properties"]["next_length"] == {
        "title": "Next Length",
        "type": "integer",
        "nullable": True,
    }
    values = components["MetricSeries"]["properties"]["values"]
    assert values["items"] == {"type": "number", "nullable": True}


def test_the_schema_validates_as_openapi_30_with_no_generator_warning(tmp_path) -> None:
    # drf-spectacular's own check: OpenAPI 3.0 (no "null" type, no propertyNames) and no
    # warning (an enum named "State71dEnum" by collision was one).
    from django.core.management import call_command

    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "StateEnum:" in text and "State71dEnum" not in text
    assert "propertyNames" not in text and "type: 'null'" not in text and "type: null" not in text


def test_blank_text_that_the_api_accepts_is_valid_by_the_schema(api, trial):
    """An ``allow_blank`` field is "blank or the constrained form": ``anyOf``, never a ``oneOf``
    that a blank value matching both alternatives would break (schemathesis flagged the API for
    accepting ``{"notes": ""}``)."""
    import jsonschema

    schema = _schema(api)
    notes = schema["components"]["schemas"]["PatchedTrialPatch"]["properties"]["notes"]
    jsonschema.validate("", notes)
    jsonschema.validate("line one\nline two", notes)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("bell \x07", notes)
    assert api.patch(f"/api/v1/trials/{trial.id}/", {"notes": ""}, format="json").status_code == 200
    blank = {"type": "string", "maxLength": 0}
    for component in schema["components"]["schemas"].values():
        for prop in component.get("properties", {}).values():
            assert blank not in prop.get("oneOf", []), prop
