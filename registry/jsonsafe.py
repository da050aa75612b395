"""What a JSON column can store on every database the registry runs on."""

from __future__ import annotations

import json
from typing import Any


def json_storage_problem(value: Any) -> str | None:
    """Why ``value`` cannot be stored in a JSON column, or None when it can.

    PostgreSQL refuses the NUL character (``\\u0000``) in ``jsonb`` strings and keys and in
    text, and JSON has no NaN or infinity (the API's parser takes the bare literals): either
    failed the ``INSERT`` as a 500 (issue #23).
    """
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError:
        return "NaN and Infinity are not allowed (JSON has no such numbers)."
    if "\\u0000" in text:
        return "NUL characters are not allowed."
    return None
