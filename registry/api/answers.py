"""Answers built through ``headway.client`` wire models, so the server's JSON and the client's
parsing (``RegistryAPI``) cannot drift apart, and the OpenAPI schema documents the same model
(``@extend_schema(responses={200: wire.Model})``, drf-spectacular's pydantic support).
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from headway.client._wire import WireModel


def answer(
    model: type[WireModel], data: Any, *, status: int = 200, exclude_unset: bool = False
) -> Response:
    """``data`` validated through ``model`` (the wire model the client parses), as a response.

    Arguments:
        model: the wire model the route's schema documents.
        data (dict | WireModel): the answer's fields.
        status: the HTTP status.
        exclude_unset: leave out fields ``data`` does not name (optional keys stay absent,
            e.g. a metric series' ``min``/``max`` without ``band``), instead of their defaults.

    Raises:
        pydantic.ValidationError: ``data`` does not fit the model (a server bug: a 500).
    """
    body = model.model_validate(data).model_dump(mode="json", exclude_unset=exclude_unset)
    return Response(body, status=status)
