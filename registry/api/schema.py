"""The OpenAPI schema's error answers: every operation documents the JSON errors it can return.

``registry.api.errors.exception_handler`` answers every error as ``{"detail": str, "errors":
{field: [message]}}``; :class:`HeadwayAutoSchema` adds those answers to each operation from what
the operation takes, so a new route is documented without a per-view list (and schemathesis's
``status_code_conformance`` check holds for it):

- 400 when it takes query parameters or a body (validation errors name the field);
- 401 and 403 when it needs authentication (no or a bad token; a trial token outside its trial,
  a non-owner's change);
- 404 when its path names an object;
- 409 for unsafe methods (an illegal state transition, a name already taken);
- 413 and 415 when it takes a body (an upload over its size limit; a body that is not JSON);
- 429 when the view throttles;
- 503 everywhere: the database is busy or unavailable right now (``registry.overload``; the
  answer carries ``Retry-After``).

A code the view declares itself (``@extend_schema(responses=...)``) is kept as declared.

Request fields are documented as strictly as they are validated: a ``CharField`` gets a pattern
refusing NUL characters (and, when it may not be blank, ``minLength: 1`` and a non-whitespace
character), a ``DictField`` with a ``max_properties`` gets ``maxProperties``, and a serializer
that refuses unknown fields (``refuses_unknown_fields = True``) gets ``additionalProperties:
false``.

Answers that are ``headway.client.wire`` models are documented by pydantic's JSON Schema, with
optional fields written as OpenAPI 3.0 ``nullable`` (:class:`OpenAPI30PydanticExtension`).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from pydantic.json_schema import model_json_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny


class ErrorSerializer(serializers.Serializer):
    """An error answer: a sentence, and the messages per field path (``{}`` when none)."""

    detail = serializers.CharField()
    # A declared field named like Serializer.errors: DRF's metaclass moves fields off the class,
    # so the property is untouched (mypy sees only the names).
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField())
    )


_UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
# Non-empty: drf-spectacular documents an allow_blank field as oneOf [this, maxLength 0].
_NO_NUL = r"^[^\x00]+$"
_NONBLANK_NO_NUL = r"^[^\x00]*[^\x00\s][^\x00]*$"


_BLANK = {"type": "string", "maxLength": 0}


class HeadwayAutoSchema(AutoSchema):
    """drf-spectacular's schema with the error answers above added to every operation."""

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        """drf-spectacular's validators, with an ``allow_blank`` string's "blank or this" as
        ``anyOf``: it writes ``oneOf``, which a blank value breaks whenever the constrained form
        also accepts it (a pattern with ``*``), so the schema called valid blank text invalid."""
        super()._insert_field_validators(field, schema)
        choices = schema.get("oneOf")
        if isinstance(choices, list) and len(choices) == 2 and choices[1] == _BLANK:
            schema["anyOf"] = schema.pop("oneOf")

    def _error_codes(self, operation: dict[str, Any]) -> list[int]:
        locations = {p.get("in") for p in operation.get("parameters", [])}
        has_input = bool(locations - {"path"}) or "requestBody" in operation
        public = any(isinstance(p, AllowAny) for p in self.view.get_permissions())
        codes = []
        if has_input:
            codes.append(400)
        if not public:
            codes += [401, 403]
        if "path" in locations:
            codes.append(404)
        if self.method in _UNSAFE:
            codes.append(409)
        if "requestBody" in operation:
            codes += [413, 415]
        if self.view.get_throttles():
            codes.append(429)
        codes.append(503)  # every operation reads the database (authentication at least)
        return codes

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and schema.get("type") == "string"
        ):
            if not field.allow_blank:
                schema.setdefault("minLength", 1)
            # DRF's CharField refuses NUL characters; blank after trimming counts as blank. A
            # field's own RegexValidator documents itself (drf-spectacular adds it after this).
            nonblank = not field.allow_blank and field.trim_whitespace
            if not any(isinstance(v, RegexValidator) for v in field.validators):
                schema.setdefault("pattern", _NONBLANK_NO_NUL if nonblank else _NO_NUL)
        if direction == "request" and isinstance(field, serializers.DictField):
            # A mapping whose size the server bounds (a setting, so read here, not declared).
            max_properties = getattr(field, "max_properties", None)
            if max_properties is not None:
                schema["maxProperties"] = max_properties
        return schema

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and getattr(serializer, "refuses_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        body = operation.get("requestBody", {})
        for media in body.get("content", {}).values():
            # A body whose schema requires fields is itself required (drf-spectacular leaves
            # raw-schema bodies optional).
            if media.get("schema", {}).get("required"):
                body["required"] = True
        responses = operation["responses"]
        for code in self._error_codes(operation):
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(ErrorSerializer, str(code))
        return operation


def openapi_30(node: Any) -> Any:
    """A JSON Schema (pydantic's) in OpenAPI 3.0's dialect: ``anyOf: [X, {"type": "null"}]``
    becomes ``X`` with ``nullable: true`` (3.0 has no ``null`` type; the schema's validator
    refuses it), and ``propertyNames`` (which 3.0 lacks) moves into the description, where a
    reader still finds the key rule. Returns a new object; ``node`` is not changed."""
    if isinstance(node, list):
        return [openapi_30(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: openapi_30(value) for key, value in node.items()}
    names = out.pop("propertyNames", None)
    if isinstance(names, dict):
        rule = ", ".join(f"{key} {value}" for key, value in sorted(names.items()))
        out["description"] = " ".join(filter(None, [out.get("description"), f"Keys: {rule}."]))
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            only = rest[0]
            out.update({"allOf": [only]} if "$ref" in only else only)
        else:
            out["anyOf"] = rest
        out["nullable"] = True
    return out


class OpenAPI30PydanticExtension(PydanticExtension):
    """drf-spectacular's pydantic support (the ``headway.client.wire`` answers), with optional
    fields written as OpenAPI 3.0 ``nullable`` (``openapi_30``); its sub-models become
    components as in drf-spectacular's own extension."""

    priority = 1

    def map_serializer(self, auto_schema, direction):
        schema = openapi_30(
            model_json_schema(
                self.target, ref_template="#/components/schemas/{model}", mode="serialization"
            )
        )
        for name, sub_schema in schema.pop("$defs", {}).items():
            component = ResolvedComponent(
                name=name, type=ResolvedComponent.SCHEMA, object=name, schema=sub_schema
            )
            auto_schema.registry.register_on_missing(component)
        return schema
