"""JSON 413 for request bodies over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, instead of Django's HTML 400.

Django refuses a body over the limit with ``RequestDataTooBig`` (a ``SuspiciousOperation``),
which becomes an HTML "Bad Request" page. API clients are told instead, in the API's error
shape, which limit they hit: before the body is read when ``Content-Length`` says so, and when
reading a body without one runs over.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse

# Routes that stream their body to storage under their own cap (never read into memory):
# checkpoint files sent through the master (HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES).
STREAMED_UPLOADS = re.compile(r"/api/v1/unmanaged/trials/\d+/runs/\d+/checkpoints/[^/]+/files/")


def _too_large(size: int | None) -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    got = f"{size} bytes" if size is not None else "larger"
    message = (
        f"The request body is {got}, over the {limit}-byte limit (it holds a model definition"
        f" of at most HEADWAY_MAX_MODEL_DEF_BYTES={settings.HEADWAY_MAX_MODEL_DEF_BYTES} bytes,"
        " base64-encoded, and the config)."
    )
    return JsonResponse({"detail": message, "errors": {"body": [message]}}, status=413)


class BodyLimitMiddleware:
    """Answer 413 with ``{"detail", "errors": {"body": [...]}}`` for oversized ``/api/`` bodies."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        streamed = STREAMED_UPLOADS.fullmatch(request.path) is not None
        if request.path.startswith("/api/") and limit is not None and not streamed:
            try:
                size = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                size = 0
            if size > limit:
                return _too_large(size)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        """A body without ``Content-Length`` that ran over the limit while it was read."""
        if isinstance(exception, RequestDataTooBig) and request.path.startswith("/api/"):
            return _too_large(None)
        return None
