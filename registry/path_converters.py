"""The ``<db_id:...>`` URL path converter: a database id, at most the largest bigint.

Django's ``<int:...>`` matches any run of digits, and an id past 2**63 - 1 then reached the
database: SQLite's driver raised OverflowError and PostgreSQL a NumericValueOutOfRange, both a
500 (schemathesis, tests/registry/api/test_host_api_fuzz.py). A converter's ValueError means
"no match" (Django: "Registering custom path converters"), so such a URL is a 404, like any id
that names nothing.
"""

from __future__ import annotations

from django.urls import register_converter

DB_ID_MAX = 2**63 - 1  # PostgreSQL's bigint, SQLite's INTEGER


class DatabaseIdConverter:
    """Digits naming an integer from 0 to ``DB_ID_MAX``; anything larger does not match."""

    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        """The id as an int.

        Raises:
            ValueError: not ASCII digits (a caller outside the URL resolver, whose ``regex``
                already checked them), or past ``DB_ID_MAX`` (Django answers 404).
        """
        if not (value.isascii() and value.isdigit()):
            raise ValueError(f"{value!r} is not a database id")
        number = int(value)
        if number > DB_ID_MAX:
            raise ValueError(f"{value} is larger than any database id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(DatabaseIdConverter, "db_id")
