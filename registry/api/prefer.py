"""The ``Prefer: return=minimal`` request header (RFC 7240, section 4.2) of write endpoints.

A client that does not read a write's answer (the SDK registering a checkpoint) asks for a
minimal one and the server skips building the full representation: for a checkpoint, its
metrics and ranking, which cost two thirds of a registration's server time (docs/performance.md).
As the RFC asks, preferences the server does not know are ignored, and one it honoured is named
in the ``Preference-Applied`` answer header.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

RETURN_MINIMAL = "return=minimal"

PREFER_PARAMETER = OpenApiParameter(
    "Prefer",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description=(
        "RFC 7240. `return=minimal`: answer only the created object's identity (the answer"
        " then carries `Preference-Applied: return=minimal`); other preferences are ignored."
    ),
)


def prefers_minimal(request: Request) -> bool:
    """Whether the request's ``Prefer`` header(s) hold ``return=minimal``.

    Preferences are comma-separated, each ``token[=value]`` with optional ``;`` parameters;
    tokens are case-insensitive and a value may be quoted (RFC 7240, section 2).
    """
    header = request.headers.get("Prefer", "")
    for preference in header.split(","):
        name, _, value = preference.split(";", 1)[0].partition("=")
        if name.strip().lower() == "return" and value.strip().strip('"') == "minimal":
            return True
    return False


def minimal(response: Response) -> Response:
    """``response`` marked as answering ``Prefer: return=minimal``."""
    response["Preference-Applied"] = RETURN_MINIMAL
    return response
