"""The SDK and the host agent read experiment configs typed (``ExperimentConfig`` and its section
models), never as mappings: a key read of a config field (``conf.get("searcher")``,
``config["checkpoint_storage"]``) is a schema of its own that drifts from the models."""

from __future__ import annotations

import ast
import pathlib
import re

from headway.expconf import SEARCHER_CONFIGS, ExperimentConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A receiver named like a config or one of its sections.
CONFIG_LIKE = re.compile(r"conf|searcher|storage|hyperparameters")


def _config_fields() -> set[str]:
    fields = set(ExperimentConfig.model_fields)
    for model in SEARCHER_CONFIGS.values():
        fields |= set(model.model_fields)
    return fields


def _key_reads(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, key, receiver)`` of every ``x.get("key", ...)`` and ``x["key"]`` load."""
    reads = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            reads.append((node.lineno, node.args[0].value, ast.unparse(node.func.value)))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
        ):
            reads.append((node.lineno, node.slice.value, ast.unparse(node.value)))
    return reads


def test_no_config_field_is_read_by_key_in_the_sdk_or_the_host_agent() -> None:
    fields = _config_fields()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {receiver}[{key!r}]"
        for package in ("headway", "workers")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, key, receiver in _key_reads(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(key, str) and key in fields and CONFIG_LIKE.search(receiver.lower())
    ]
    assert found == []


def test_the_scan_finds_a_key_read() -> None:
    source = 'def f(exp_conf):\n    return exp_conf.get("searcher") or conf["records_per_epoch"]\n'
    reads = _key_reads(ast.parse(source))
    assert [(key, receiver) for _, key, receiver in reads] == [
        ("searcher", "exp_conf"),
        ("records_per_epoch", "conf"),
    ]
    assert {key for _, key, _ in reads} <= _config_fields()
