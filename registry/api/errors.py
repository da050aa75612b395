"""One place that turns errors into JSON answers: ``{"detail": ..., "errors": {field: [...]}}``."""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from registry.errors import RegistryError
from registry.overload import RETRY_AFTER_SECONDS, api_body, is_database_unavailable


def _flatten(data: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(data, dict):
        out: dict[str, list[str]] = {}
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, path))
        return out
    if isinstance(data, list) and data and all(isinstance(x, str) for x in data):
        return {prefix or "input": [str(x) for x in data]}
    if isinstance(data, list):
        out = {}
        for i, value in enumerate(data):
            out.update(_flatten(value, f"{prefix}[{i}]"))
        return out
    return {prefix or "input": [str(data)]}


def exception_handler(exc, context):
    """DRF exception handler: registry errors keep their status; validation errors name fields."""
    if isinstance(exc, RegistryError):
        return Response({"detail": exc.detail, "errors": exc.errors}, status=exc.status)
    if is_database_unavailable(exc):
        # Pool exhausted, too many clients, a restarting server: retryable, never a 500.
        return Response(
            api_body(exc),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    if isinstance(exc, exceptions.ValidationError):
        errors = _flatten(exc.detail)
        field, messages = next(iter(errors.items()), ("input", ["invalid"]))
        return Response(
            {"detail": f"Invalid {field}: {messages[0]}", "errors": errors},
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "errors" not in response.data:
        response.data.setdefault("errors", {})
    return response


def not_found(request, exception):
    """``handler404``: a JSON 404 in the API's error shape for ``/api/`` paths no route matches
    (``trials/abc/metrics.csv``), Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found.", "errors": {}}, status=404)
    return page_not_found(request, exception)
