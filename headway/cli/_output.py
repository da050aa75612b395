"""Plain-text output helpers: aligned tables, key/value blocks, number and size formats."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def fmt(value: Any) -> str:
    """Format one cell: ``-`` for None, 4 significant digits for floats, JSON for containers."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def fmt_percent(fraction: Any) -> str:
    """``0.4`` -> ``40%``; ``-`` when unknown."""
    if not isinstance(fraction, int | float) or isinstance(fraction, bool):
        return "-"
    return f"{fraction * 100:.0f}%"


def fmt_size(num_bytes: Any) -> str:
    """Bytes in binary units: ``123456`` -> ``120.6 KiB``."""
    if not isinstance(num_bytes, int | float) or isinstance(num_bytes, bool):
        return "-"
    size = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def fmt_time(timestamp: Any) -> str:
    """ISO-8601 timestamp shortened to ``YYYY-MM-DD HH:MM:SS``."""
    if not timestamp:
        return "-"
    text = str(timestamp).replace("T", " ")
    return text[:19]


def truncate(text: str, width: int = 60) -> str:
    """Cut ``text`` to ``width`` characters with an ellipsis."""
    return text if len(text) <= width else text[: width - 3] + "..."


def print_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO | None = None
) -> None:
    """Print rows under headers with columns padded to their widest cell."""
    out = out or sys.stdout
    cells = [[fmt(cell) for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [headers, ["-" * width for width in widths], *cells]
    for line in lines:
        padded = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        print("  ".join(padded).rstrip(), file=out)


def print_fields(pairs: Iterable[tuple[str, Any]], out: TextIO | None = None) -> None:
    """Print ``name: value`` lines with the values aligned."""
    pairs = list(pairs)
    width = max((len(name) for name, _ in pairs), default=0)
    for name, value in pairs:
        print(f"{name + ':':<{width + 1}} {fmt(value)}", file=out or sys.stdout)


def print_json(document: Any, out: TextIO | None = None) -> None:
    """Print a JSON document, indented."""
    print(json.dumps(document, indent=2, sort_keys=False), file=out or sys.stdout)
