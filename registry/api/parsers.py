"""The REST API's JSON body parser: DRF's, with a body nested too deeply answered as a 400."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that turns a ``RecursionError`` into a 400 (``ParseError``).

    Python's ``json`` decodes nested arrays and objects recursively, so a body such as
    ``{"config": {"a": {"a": ...}}}`` 100,000 levels deep raised ``RecursionError`` (an HTML
    500) instead of a parse error.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        """DRF's ``parse``; raises ``ParseError`` for bodies nested past Python's recursion limit."""
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
