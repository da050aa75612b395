"""What every ``describe`` command prints: an object's fields, then its sections (trials,
checkpoints, versions, projects...); ``--json`` prints the registry's answers instead."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from headway.cli._output import print_fields, print_json, print_table


@dataclasses.dataclass(frozen=True)
class Section:
    """A block after the object's fields, set off by a blank line.

    Attributes:
        title (str | None): its heading (``Trials`` prints ``Trials:``); None for none.
        rows: the table's rows under ``headers``; without ``headers``, ``(name, value)`` pairs
            printed as aligned ``name: value`` lines.
        headers (Sequence[str] | None): the table's column names.
        note (str | None): a line printed after it (``... and 12 more series``).
    """

    title: str | None
    rows: Iterable[Sequence[Any]]
    headers: Sequence[str] | None = None
    note: str | None = None


def describe(
    args: argparse.Namespace,
    document: Any,
    fields: Iterable[tuple[str, Any]],
    *sections: Section,
) -> int:
    """Print ``document`` as JSON with ``--json`` (``args.json``); else ``fields`` as aligned
    ``name: value`` lines, then each section. Returns the command's exit status, 0."""
    if args.json:
        print_json(document)
        return 0
    print_fields(fields)
    for section in sections:
        print()
        if section.title is not None:
            print(f"{section.title}:")
        if section.headers is None:
            print_fields((name, value) for name, value in section.rows)
        else:
            print_table(section.headers, section.rows)
        if section.note is not None:
            print(section.note)
    return 0
