"""Loading experiment configs from YAML safely: YAML 1.2 floats, bounded alias expansion and
nesting ("billion laughs" and 500-level documents)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from headway.expconf._errors import ConfigError


class _YAMLLoader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-3`` as a float, as YAML 1.2 (and Determined's CLI) do.

    PyYAML follows YAML 1.1, where a float needs a dot, so ``lr: 1e-3`` would be a string.
    """


_YAMLLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


MAX_YAML_VALUES = 100_000
"""Most values (mappings, lists and scalars) a config may hold once YAML aliases are expanded:
aliases are shared by the loader but copied by validation and storage, so nine nested aliases
of nine ("billion laughs") would expand a 700-byte document to hundreds of millions."""


def _expanded_values(data: Any, limit: int) -> int:
    """How many values ``data`` holds with shared (aliased) parts counted at each use.

    Linear in the number of distinct objects: each one's count is computed once.

    Raises:
        ConfigError: keyed ``config``, over ``limit`` or for a recursive alias.
    """
    counts: dict[int, int] = {}
    in_progress: set[int] = set()

    def count(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        key = id(node)
        if key in counts:
            return counts[key]
        if key in in_progress:
            raise ConfigError.single("config", "a YAML alias refers to itself (a recursive config)")
        in_progress.add(key)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += count(child)
            if total > limit:
                raise ConfigError.single(
                    "config",
                    f"the config holds more than {limit} values once its YAML aliases are"
                    " expanded; write the values out or use fewer aliases",
                )
        in_progress.discard(key)
        counts[key] = total
        return total

    return count(data)


MAX_CONFIG_DEPTH = 100
"""Deepest nesting of mappings and lists a config may have: validation and serialisation
recurse per level, and a config 500 levels deep failed there (pydantic's recursion guard, a 500
on the server)."""


def check_depth(data: Any) -> None:
    """Refuse ``data`` nested deeper than ``MAX_CONFIG_DEPTH`` (walked without recursion).

    Raises:
        ConfigError: keyed ``config``.
    """
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError.single(
                "config", f"the config is nested more than {MAX_CONFIG_DEPTH} levels deep"
            )
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def load_yaml(text: str, max_values: int = MAX_YAML_VALUES) -> Any:
    """Parse YAML text; raise ``ConfigError`` keyed ``config`` with line and column on errors.

    Arguments:
        text (str): the YAML document.
        max_values (int): most values the document may hold with its aliases expanded
            (``MAX_YAML_VALUES``).

    Raises:
        ConfigError: keyed ``config``: malformed YAML, nested too deeply for the parser, or over
            ``max_values`` (``_expanded_values``).
    """
    try:
        data = yaml.load(text, Loader=_YAMLLoader)  # a SafeLoader subclass
        _expanded_values(data, max_values)
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError.single("config", "the YAML document is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError.single("config", f"malformed YAML{where}: {problem}") from None
    return data
