"""docs/configuration.md lists exactly the environment variables the code reads (and sets).

The code is parsed with ``ast``, never imported. A *read* is a call of ``os.environ.get(NAME)``,
``os.getenv(NAME)``, ``os.environ.setdefault(NAME, ...)``, ``os.environ.pop(NAME)``, a load of
``os.environ[NAME]``, a test ``NAME in os.environ``, or a call of one of the typed readers in
``config/env.py`` (``envstr``/``envbool``/``envint``/``envfloat``: every top-level function
there that reads ``os.environ`` with its first parameter, and the same in the host agent's ``workers/config.py``),
or a field of a ``pydantic-settings`` model in ``headway/cluster_settings.py`` (a class deriving
from ``BaseSettings``, or from such a class: each annotated field named like a variable is one).
``NAME`` must be a string literal, a variable bound to one (module or function level), or the
variable of a ``for`` loop over literal strings; any other
read is *dynamic* and must be listed in ``DYNAMIC_READS`` with the reason it is fine.

Tables in docs/configuration.md whose first header cell is ``variable`` list variables the code
reads; the table headed ``variable (set by the worker)`` lists what ``workers/launch.py``'s
``environment()`` sets in trial processes. Both are compared with the code in both directions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO

DOC = REPO / "docs" / "configuration.md"
SCANNED = ("config", "registry", "dashboard", "workers", "headway")
ENV_HELPERS_MODULES = (REPO / "config" / "env.py", REPO / "workers" / "config.py")
SETTINGS_MODULES = (REPO / "headway" / "cluster_settings.py",)
TRIAL_ENV_MODULE = REPO / "workers" / "launch.py"
TRIAL_ENV_FUNCTION = "environment"

READ_TABLE = "variable"
SET_TABLE = "variable (set by the worker)"

# Reads whose name is not a literal: (path relative to the repository, enclosing function) -> why.
DYNAMIC_READS = {
    ("config/env.py", "envstr"): "typed reader; its callers pass literal names and are scanned",
    ("config/env.py", "envbool"): "typed reader; its callers pass literal names and are scanned",
    ("config/env.py", "envint"): "typed reader; its callers pass literal names and are scanned",
    ("config/env.py", "envfloat"): "typed reader; its callers pass literal names and are scanned",
    (
        "workers/config.py",
        "_env_text",
    ): "typed reader; its callers pass literal names and are scanned",
    (
        "workers/config.py",
        "_env_number",
    ): "typed reader; its callers pass literal names and are scanned",
}

# Documented in a `variable` table although no Headway code reads them: name -> who reads them.
# (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY were, until settings refused MinIO's defaults.)
READ_BY_LIBRARIES: dict[str, str] = {}

ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


# -- reading the code -----------------------------------------------------------------------------


def _python_files() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _literal_strings(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        values = [_literal_strings(element) for element in node.elts]
        if all(value is not None and len(value) == 1 for value in values):
            return [value[0] for value in values if value]
    return None


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node.name
    return "<module>"


def _resolve(node: ast.AST, parents: dict[ast.AST, ast.AST], tree: ast.Module) -> list[str] | None:
    """The literal name(s) ``node`` stands for, or None when it is built at run time."""
    literal = _literal_strings(node)
    if literal is not None and isinstance(node, ast.Constant):
        return literal
    if not isinstance(node, ast.Name):
        return None
    scopes: list[ast.AST] = []
    current: ast.AST = node
    while current in parents:
        current = parents[current]
        # `for NAME in ("A", "B"):` around the read.
        if (
            isinstance(current, ast.For)
            and isinstance(current.target, ast.Name)
            and current.target.id == node.id
        ):
            return _literal_strings(current.iter)
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
            scopes.append(current)
    scopes.append(tree)
    for scope in scopes:
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and node.id in {
            a.arg for a in scope.args.args + scope.args.kwonlyargs
        }:
            return None  # a parameter: the caller decides
        body = scope.body if isinstance(scope, ast.Module | ast.FunctionDef) else []
        for statement in body:
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and statement.targets[0].id == node.id
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                return [statement.value.value]
    return None


def env_helpers() -> set[str]:
    """Top-level functions of ``ENV_HELPERS_MODULES`` that read ``os.environ`` with their first
    argument."""
    helpers = set()
    for module in ENV_HELPERS_MODULES:
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef) or not function.args.args:
                continue
            first = function.args.args[0].arg
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and _is_environ(node.func.value)
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id == first
                ):
                    helpers.add(function.name)
    return helpers


def _read_targets(node: ast.AST, helpers: set[str]) -> Iterator[ast.AST]:
    """The name expressions ``node`` reads from the environment (none for most nodes)."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and _is_environ(func.value):
            if func.attr in ("get", "setdefault", "pop"):
                yield node.args[0]
        elif isinstance(func, ast.Attribute) and func.attr == "getenv":
            if isinstance(func.value, ast.Name) and func.value.id == "os":
                yield node.args[0]
        else:
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in helpers:
                yield node.args[0]
    elif isinstance(node, ast.Subscript) and _is_environ(node.value):
        if isinstance(node.ctx, ast.Load):
            yield node.slice
    elif (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In | ast.NotIn)
        and _is_environ(node.comparators[0])
    ):
        yield node.left


def settings_fields(tree: ast.Module) -> Iterator[ast.AnnAssign]:
    """The fields of the ``BaseSettings`` models defined in ``tree`` (each reads its name)."""
    models = {"BaseSettings"}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
            isinstance(base, ast.Name) and base.id in models for base in node.bases
        ):
            models.add(node.name)
            for statement in node.body:
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and ENV_NAME.match(statement.target.id)
                ):
                    yield statement


def scan_reads() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """``(name -> {"path:line", ...}, {(path, function) of dynamic reads})`` over SCANNED."""
    helpers = env_helpers()
    names: dict[str, set[str]] = {}
    dynamic: set[tuple[str, str]] = set()
    for path in _python_files():
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        parents = _parents(tree)
        if path in SETTINGS_MODULES:
            for field in settings_fields(tree):
                assert isinstance(field.target, ast.Name)
                names.setdefault(field.target.id, set()).add(f"{rel}:{field.lineno}")
        for node in ast.walk(tree):
            for target in _read_targets(node, helpers):
                resolved = _resolve(target, parents, tree)
                if resolved is None:
                    dynamic.add((rel, _enclosing_function(node, parents)))
                    continue
                for name in resolved:
                    names.setdefault(name, set()).add(f"{rel}:{node.lineno}")
    return names, dynamic


def trial_env_names() -> tuple[set[str], set[str]]:
    """``(set, removed)``: names ``environment()`` in workers/launch.py sets and removes."""
    tree = ast.parse(TRIAL_ENV_MODULE.read_text(encoding="utf-8"))
    parents = _parents(tree)
    function = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == TRIAL_ENV_FUNCTION
        ),
        None,
    )
    assert function is not None, f"{TRIAL_ENV_MODULE} has no {TRIAL_ENV_FUNCTION}(); update me"
    set_names: set[str] = set()
    removed: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            resolved = _resolve(node.slice, parents, tree)
            assert resolved is not None, f"dynamic env name at launch.py:{node.lineno}"
            set_names.update(resolved)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr == "update" and isinstance(node.args[0], ast.Dict):
                for key in node.args[0].keys:
                    assert key is not None, f"**-merge at launch.py:{node.lineno}; list names"
                    resolved = _resolve(key, parents, tree)
                    assert resolved is not None, f"dynamic env name at launch.py:{node.lineno}"
                    set_names.update(resolved)
            elif node.func.attr == "pop":
                resolved = _resolve(node.args[0], parents, tree)
                assert resolved is not None, f"dynamic env name at launch.py:{node.lineno}"
                removed.update(resolved)
    return set_names, removed


# -- reading the doc ------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    # Split on pipes that are not escaped (`serve\|demo` stays one cell).
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def doc_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """``(first header cell, [the cells of each row])`` for every table of the page."""
    tables: list[tuple[str, list[list[str]]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("|"):
            i += 1
            continue
        block = []
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            block.append(lines[i])
            i += 1
        header = _cells(block[0])[0].lower()
        rows = [_cells(line) for line in block[2:]]
        tables.append((header, rows))
    return tables


def documented(kind: str) -> dict[str, int]:
    """Variables named in the first column of the ``kind`` tables -> how often."""
    counts: dict[str, int] = {}
    tables = doc_tables(DOC.read_text(encoding="utf-8"))
    for header, rows in tables:
        if header != kind:
            continue
        for cell, *_ in rows:
            names = re.findall(r"`([^`]+)`", cell)
            assert names, f"docs/configuration.md: row {cell!r} names no `VARIABLE`"
            for name in names:
                assert ENV_NAME.match(name), f"docs/configuration.md: {name!r} is not a variable"
                counts[name] = counts.get(name, 0) + 1
    return counts


# -- tests ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reads() -> dict[str, set[str]]:
    names, dynamic = scan_reads()
    unexplained = sorted(dynamic - set(DYNAMIC_READS))
    assert not unexplained, (
        "environment reads whose variable name is not a literal; use a literal name or add the "
        f"site to DYNAMIC_READS with the reason: {unexplained}"
    )
    return names


def test_the_scanner_finds_known_reads(reads):
    # Guards against a scanner that silently finds nothing.
    for name, where in (
        ("DATABASE_URL", "config/settings.py"),  # envstr()
        ("HEADWAY_WORKER_SLOTS", "registry/management/commands/serve.py"),  # envint()
        ("HEADWAY_HOST_TOKEN", "workers/config.py"),  # the agent's _env_text()
        ("HEADWAY_LEASE_SECONDS", "headway/cluster_settings.py"),  # a SharedSettings field
        ("HEADWAY_KEEP_WORKDIRS", "workers/runner.py"),  # os.environ.get()
        ("HEADWAY_CLUSTER_INFO", "headway/_info.py"),
        ("LOCAL_WORLD_SIZE", "headway/core/_distributed.py"),  # for-loop over literals
    ):
        assert any(site.startswith(where) for site in reads.get(name, ())), (name, where)


def test_dynamic_read_allow_list_is_not_stale():
    _, dynamic = scan_reads()
    stale = sorted(set(DYNAMIC_READS) - dynamic)
    assert not stale, f"DYNAMIC_READS entries with no dynamic read any more: {stale}"


def test_every_variable_the_code_reads_is_documented(reads):
    listed = documented(READ_TABLE)
    missing = {name: sorted(sites) for name, sites in reads.items() if name not in listed}
    assert not missing, f"read by the code but not in a `variable` table of {DOC}: {missing}"


def test_every_documented_variable_is_read(reads):
    listed = documented(READ_TABLE)
    dead = sorted(name for name in listed if name not in reads and name not in READ_BY_LIBRARIES)
    assert not dead, f"documented in {DOC} but read nowhere in {', '.join(SCANNED)}: {dead}"
    for name in READ_BY_LIBRARIES:
        assert name not in reads, f"{name} is read by Headway's code now; drop it from the list"


def test_no_variable_is_documented_twice_in_the_same_kind_of_table():
    for kind in (READ_TABLE, SET_TABLE):
        twice = sorted(name for name, count in documented(kind).items() if count > 1)
        assert not twice, f"{kind!r} tables list these more than once: {twice}"


def test_doc_tables_are_of_known_kinds():
    headers = {header for header, _ in doc_tables(DOC.read_text(encoding="utf-8"))}
    assert headers <= {READ_TABLE, SET_TABLE}, headers - {READ_TABLE, SET_TABLE}
    assert headers == {READ_TABLE, SET_TABLE}


def test_trial_process_variables_match_the_worker():
    set_names, removed = trial_env_names()
    listed = set(documented(SET_TABLE))
    assert listed == set_names, (
        f"set by workers/launch.py but not documented: {sorted(set_names - listed)}; "
        f"documented but not set: {sorted(listed - set_names)}"
    )
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Trial processes", 1)[1]
    for name in removed:
        assert f"`{name}`" in section, f"the Trial processes section must say {name} is removed"


def test_docker_compose_sets_only_documented_variables():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))
    listed = set(documented(READ_TABLE))
    names: set[str] = set()
    for service in compose["services"].values():
        environment = service.get("environment") or {}
        names.update(environment if isinstance(environment, dict) else [])
    # The postgres and minio images' own.
    internal = {
        "POSTGRES_USER",
        "POSTGRES_PASSWORD",
        "POSTGRES_DB",
        "MINIO_ROOT_USER",
        "MINIO_ROOT_PASSWORD",
    }
    undocumented = sorted(names - listed - internal)
    assert not undocumented, f"docker-compose.yml sets undocumented variables: {undocumented}"
