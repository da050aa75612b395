"""What a JSON column can store on every database the registry runs on."""

from __future__ import annotations

import json
from typing import Any


def json_storage_problem(value: Any) -> str | None:
    """Why ``value`` cannot be stored in a JSON column, or None when it can.

    PostgreSQL refuses the NUL character (``\\u0000``) in ``jsonb`` strings and keys and in
    text, and JSON has no NaN or infinity (the API's parser takes the bare literals): either
    failed the ``INSERT`` as a 500.
    """
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        return "NaN and Infinity are not allowed (JSON has no such numbers)."
    if "\\u0000" in text:
        return "NUL characters are not allowed."
    return None


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON text (UTF-8, ``json.dumps``' default separators): the size
    the size limits on free-form JSON fields are measured in."""
    return len(json.dumps(value, ensure_ascii=False).encode())


def check_json_size(value: Any, *, field: str, setting: str) -> None:
    """Refuse a free-form JSON value larger than the limit the setting ``setting`` names.

    Such fields (a checkpoint's ``metadata``) are copied into every list and detail answer
    that holds their row, so one oversized value costs every later reader; the limit keeps a
    row's share of a page small.

    Raises:
        PayloadTooLarge: (413) ``errors[field]`` names the size, the limit and the setting.
    """
    from django.conf import settings

    from registry.errors import PayloadTooLarge

    limit = getattr(settings, setting)
    size = json_size(value)
    if size > limit:
        message = f"{size} bytes as JSON; at most {limit} ({setting})."
        raise PayloadTooLarge(f"{field} is too large: {message}", {field: [message]})
