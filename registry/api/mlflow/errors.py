"""Errors of the MLflow-compatible API in MLflow's own shape and HTTP codes.

MLflow's server answers ``{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "..."}`` with
the HTTP status of ``mlflow.exceptions.ERROR_CODE_TO_HTTP_STATUS``; its client turns that into
an ``MlflowException`` carrying the code. Headway's own errors (``registry.errors``, DRF's
authentication and validation errors) are answered in that shape too, so an MLflow script sees
MLflow's codes whatever refused it. A conflict (Headway's 409) is ``RESOURCE_CONFLICT``, never
MLflow's ``INVALID_STATE``: that one is a 500, which the client retries for minutes.
"""

from __future__ import annotations

import logging

from django.core.exceptions import ObjectDoesNotExist
from django.http import JsonResponse
from rest_framework import exceptions

from registry.errors import RegistryError
from registry.overload import RETRY_AFTER_SECONDS, is_database_unavailable

logger = logging.getLogger("headway.mlflow")

# MLflow's error codes and HTTP statuses (mlflow/exceptions.py), the ones this API answers.
HTTP_STATUS = {
    "INVALID_PARAMETER_VALUE": 400,
    "BAD_REQUEST": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "RESOURCE_CONFLICT": 409,
    "REQUEST_LIMIT_EXCEEDED": 429,
    "INTERNAL_ERROR": 500,
    "NOT_IMPLEMENTED": 501,
    "TEMPORARILY_UNAVAILABLE": 503,
}
# Headway's statuses (registry.errors, DRF) as MLflow codes.
_CODE_OF_STATUS = {
    400: "INVALID_PARAMETER_VALUE",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "RESOURCE_DOES_NOT_EXIST",
    405: "ENDPOINT_NOT_FOUND",
    409: "RESOURCE_CONFLICT",
    413: "INVALID_PARAMETER_VALUE",
    429: "REQUEST_LIMIT_EXCEEDED",
    503: "TEMPORARILY_UNAVAILABLE",
}


class MlflowError(Exception):
    """An error answered as ``{"error_code": code, "message": message}``.

    Arguments:
        code: one of ``HTTP_STATUS``'s keys (MLflow's ``ErrorCode`` names).
        message: what went wrong, naming the field or object.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        if code not in HTTP_STATUS:
            raise ValueError(f"unknown MLflow error code {code!r}")
        self.code = code
        self.message = message


def invalid(message: str) -> MlflowError:
    """``INVALID_PARAMETER_VALUE`` (400)."""
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def not_found(message: str) -> MlflowError:
    """``RESOURCE_DOES_NOT_EXIST`` (404)."""
    return MlflowError("RESOURCE_DOES_NOT_EXIST", message)


def error_response(code: str, message: str, headers: dict[str, str] | None = None) -> JsonResponse:
    """The JSON answer of an error ``code`` (status from ``HTTP_STATUS``)."""
    return JsonResponse(
        {"error_code": code, "message": message}, status=HTTP_STATUS[code], headers=headers
    )


def _registry_message(exc: RegistryError) -> str:
    if exc.errors:
        field, messages = next(iter(exc.errors.items()))
        return (
            f"{exc.detail} ({field}: {'; '.join(messages)})"
            if field not in exc.detail
            else exc.detail
        )
    return exc.detail


def to_response(exc: Exception) -> JsonResponse:
    """Answer any exception a handler raised in MLflow's shape.

    ``MlflowError`` as it says; ``registry.errors.RegistryError`` by its status; DRF's
    authentication (401), permission (403), parse and validation (400) errors; a missing row
    (``ObjectDoesNotExist``) 404; an unavailable database 503 with ``Retry-After``. Anything
    else is re-raised (Django's 500 handler logs it): a 500 is a bug, not an answer.
    """
    if isinstance(exc, MlflowError):
        return error_response(exc.code, exc.message)
    if isinstance(exc, RegistryError):
        code = _CODE_OF_STATUS.get(exc.status, "INVALID_PARAMETER_VALUE")
        return error_response(code, _registry_message(exc))
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return error_response("UNAUTHENTICATED", str(exc.detail))
    if isinstance(exc, exceptions.APIException):
        code = _CODE_OF_STATUS.get(exc.status_code, "INVALID_PARAMETER_VALUE")
        return error_response(code, str(exc.detail))
    if isinstance(exc, ObjectDoesNotExist):
        return error_response("RESOURCE_DOES_NOT_EXIST", str(exc))
    if is_database_unavailable(exc):
        return error_response(
            "TEMPORARILY_UNAVAILABLE",
            "The database is unavailable; retry shortly.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    raise exc
