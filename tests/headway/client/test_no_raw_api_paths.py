"""One typed client: no module outside ``headway/client`` spells a REST path of the
registry; every call goes through ``RegistryAPI`` and its route table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from headway.client._routes import HOST_ROUTES, ROUTES, TRIAL_ROUTES, USER_ROUTES

REPO = Path(__file__).resolve().parents[3]
SCANNED = ("headway", "workers")
# The first segment of every route ("trials", "host-agent", "auth"...), and the API root.
PREFIXES = sorted({template.split("/", 1)[0] for _, template in ROUTES.values()})
API_PATH = re.compile(r"^/?(api/v\d+/)?(" + "|".join(map(re.escape, PREFIXES)) + ")/")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (they may name a route in prose)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with ``{}`` for each formatted value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    return None


def raw_api_paths(path: Path) -> list[str]:
    """``file:line: text`` of every string literal in ``path`` that starts like an API path."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    skip |= {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    found = []
    for node in ast.walk(tree):
        text = None if id(node) in skip else _text(node)
        if text is not None and (API_PATH.match(text) or "/api/v1" in text):
            found.append(f"{where}:{node.lineno}: {text!r}")  # type: ignore[attr-defined]
    return found


def test_no_module_outside_the_client_spells_an_api_path() -> None:
    modules = [
        path
        for folder in SCANNED
        for path in sorted((REPO / folder).rglob("*.py"))
        if not path.is_relative_to(REPO / "headway" / "client")
    ]
    assert len(modules) > 100
    found = [hit for path in modules for hit in raw_api_paths(path)]
    assert found == [], "call headway.client.RegistryAPI instead:\n" + "\n".join(found)


def test_the_scan_finds_the_paths_it_is_meant_to_find(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docs may name trials/{id}/metrics/."""\n'
        "def f(session, trial_id, uuid):\n"
        '    """GET checkpoints/{uuid}/ in prose is fine."""\n'
        '    session.get(f"trials/{trial_id}/preempt/")\n'
        '    session.post("experiments/", json={})\n'
        '    session.get("/api/v1/workers/")\n'
        '    return "checkpoints", f"checkpoints/{uuid}/download"\n'
    )
    lines = [hit.split(":")[1] for hit in raw_api_paths(sample)]
    assert lines == ["4", "5", "6", "7"]


def test_one_route_table_one_entry_per_endpoint() -> None:
    assert len(ROUTES) == len(HOST_ROUTES) + len(TRIAL_ROUTES) + len(USER_ROUTES)
    endpoints = list(ROUTES.values())
    assert len(set(endpoints)) == len(endpoints), "two names for one endpoint"
    for name, (method, template) in ROUTES.items():
        assert method in ("GET", "POST", "PUT", "DELETE"), name
        assert not template.startswith("/") and "api/v1" not in template, name
