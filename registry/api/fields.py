"""Serializer fields shared by the REST API's input serializers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from registry.jsonsafe import json_storage_problem


class StorableDictField(serializers.DictField):
    """A ``DictField`` whose value can be stored as JSON on every database
    (``json_storage_problem``); the 400 names the field."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = json_storage_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value
