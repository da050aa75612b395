"""Serializer fields shared by the REST API's input serializers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from registry.jsonsafe import check_json_size, json_storage_problem


class StorableDictField(serializers.DictField):
    """A ``DictField`` whose value can be stored as JSON on every database
    (``json_storage_problem``); the 400 names the field.

    ``max_bytes_setting``: the name of the setting that bounds the value's size as JSON; a
    larger value is a 413 naming the field and the limit (``check_json_size``).
    """

    def __init__(self, *args: Any, max_bytes_setting: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes_setting = max_bytes_setting

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        problem = json_storage_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        if self.max_bytes_setting is not None:
            check_json_size(value, field=self.field_name or "input", setting=self.max_bytes_setting)
        return value
