"""``ConfigError``: every problem in an experiment config, keyed by dotted field path."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from headway.expconf._base import FIELD_ERROR, UNION_ERROR, UNIONS, is_tag, model_at

_TYPE_NAMES = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean (true/false)",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}


class ConfigError(ValueError):
    """An invalid experiment config (or a value derived from one).

    Attributes:
        errors (dict[str, list[str]]): dotted field path -> messages, e.g.
            ``{"hyperparameters.lr.maxval": ["must be greater than minval (0.1)"]}``. The path
            ``"config"`` means the document as a whole (unparseable YAML, not a mapping).
        title (str): first line of ``str(error)``; callers may set it to name the file.

    ``str(error)`` is one readable multi-line message listing every field.
    """

    def __init__(self, errors: dict[str, list[str]], title: str = "invalid experiment config"):
        self.errors = {path: list(messages) for path, messages in errors.items()}
        self.title = title
        super().__init__(self._render())

    def __str__(self) -> str:
        return self._render()

    def _render(self) -> str:
        lines = [f"{self.title}:"]
        for path, messages in self.errors.items():
            lines.extend(f"  {path}: {message}" for message in messages)
        return "\n".join(lines)

    @classmethod
    def single(cls, path: str, message: str) -> ConfigError:
        """A ``ConfigError`` with one message for one field."""
        return cls({path: [message]})

    @classmethod
    def from_validation_error(
        cls,
        exc: ValidationError,
        root: type[BaseModel] | None = None,
        prefix: Sequence[str | int] = (),
    ) -> ConfigError:
        """Translate pydantic's errors into dotted paths and messages in config vocabulary.

        Arguments:
            exc (ValidationError): what pydantic raised.
            root (type[BaseModel] | None): the model validated, to list allowed field names
                next to unknown ones.
            prefix (tuple): path parts to put in front (e.g. ``("hyperparameters",)``).
        """
        errors: dict[str, list[str]] = {}
        for error in exc.errors(include_url=False):
            raw_loc = tuple(error["loc"])
            loc = tuple(prefix) + tuple(part for part in raw_loc if not is_tag(part))
            if error["type"] == "extra_forbidden":
                model = model_at(root or BaseModel, raw_loc[:-1])
                allowed = ", ".join(sorted(model.model_fields)) if model else "see the docs"
                message = f"unknown field '{raw_loc[-1]}'; allowed fields: {allowed}"
                errors.setdefault(format_path(loc), []).append(message)
                continue
            for path, message in _translate(error, loc):
                messages = errors.setdefault(format_path(path), [])
                if message not in messages:
                    messages.append(message)
        return cls(errors)


def format_path(loc: Iterable[str | int]) -> str:
    """``("labels", 0)`` -> ``"labels[0]"``; ``("searcher", "metric")`` -> ``"searcher.metric"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "config"


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _translate(error: Any, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    kind: str = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind.startswith(UNION_ERROR + "."):
        info = UNIONS[kind.split(".", 1)[1]]
        allowed = ", ".join(info.public)
        if not isinstance(value, dict):
            return [(loc, f"must be a mapping with a '{info.key}' key, got {_describe(value)}")]
        if info.key not in value:
            return [((*loc, info.key), f"field required; allowed: {allowed}")]
        return [((*loc, info.key), f"invalid value {value[info.key]!r}; allowed: {allowed}")]
    if kind == FIELD_ERROR:
        return [((*loc, ctx["field"]), ctx["message"])]
    if kind == "too_short":
        return [(loc, f"must have at least {ctx.get('min_length', 1)} item(s)")]
    if kind == "literal_error":
        return [(loc, f"invalid value {value!r}; allowed: {ctx.get('expected', '')}")]
    if kind == "missing":
        return [(loc, "field required")]
    for bound, op in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
        if bound in ctx and kind.startswith(("greater_than", "less_than")):
            return [(loc, f"must be {op} {ctx[bound]}, got {value!r}")]
    if kind in _TYPE_NAMES:
        return [(loc, f"wrong type: expected {_TYPE_NAMES[kind]}, got {_describe(value)}")]
    message: str = error["msg"]
    for noise in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(noise)
    return [(loc, message)]
