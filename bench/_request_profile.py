"""Where a request's time goes: cProfile self time grouped by package (``--profile`` of benches)."""

from __future__ import annotations

_PACKAGES = (
    ("sqlite3", "sqlite3"),
    ("psycopg", "psycopg"),
    ("django/db", "django ORM"),
    ("pydantic", "pydantic"),
    ("rest_framework", "DRF"),
    ("json", "json"),
    ("registry", "registry"),
    ("django", "django (other)"),
)


def print_by_package(stats, n_requests: int) -> None:
    """Self time (tottime) per package, so the table says where a request's time goes."""
    totals: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():
        where = f"{filename}:{func}"
        label = next((lbl for key, lbl in _PACKAGES if key in where), "other")
        if filename == "~" and ("sqlite3" in func or "psycopg" in func or "execute" in func):
            label = "db driver (C)"
        totals[label] = totals.get(label, 0.0) + tottime
    whole = sum(totals.values())
    for label, secs in sorted(totals.items(), key=lambda kv: -kv[1]):
        pct = 100 * secs / whole
        print(f"  {label:16s} {secs * 1000 / n_requests:8.3f} ms/request  {pct:5.1f}%")
