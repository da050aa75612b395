"""List pages: ``?limit=`` and ``?offset=`` validated, bounded and documented with their bounds.

DRF's ``LimitOffsetPagination`` silently falls back to its default on a bad value (so a typo
is accepted and ignored) and without ``max_limit`` hands any ``limit`` to the database (a
20-digit one overflowed SQLite's integer: a 500).
"""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination

from registry.api.params import int_param

MAX_LIMIT = 1000
MAX_OFFSET = 2**62


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` in 1..``MAX_LIMIT`` (default ``PAGE_SIZE``), ``offset`` in 0..``MAX_OFFSET``;
    anything else is a 400 naming the parameter."""

    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        default = self.default_limit or MAX_LIMIT  # PAGE_SIZE (settings), always set
        return int_param(request, self.limit_query_param, default, lo=1, hi=MAX_LIMIT)

    def get_offset(self, request) -> int:
        return int_param(request, self.offset_query_param, 0, lo=0, hi=MAX_OFFSET)

    def get_schema_operation_parameters(self, view) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": MAX_LIMIT},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
