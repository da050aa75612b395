"""The rules for text that people edit: names, descriptions, labels, notes and comments.

One definition for the REST API and the dashboard (``registry.lifecycle.experiment_patch``,
``trial_patch`` and ``registry.model_registry``'s updates call these), so both front ends refuse
the same input with the same messages. Each check raises ``InvalidInput`` whose errors name the
field (``{"labels": ["..."]}``).

Limits are in characters: a name fits its column (256), a description or comment 10,000, notes
(Markdown) 100,000. A label is 1-256 characters with no comma (the dashboard edits labels as one
comma-separated line, and Determined's ``--labels`` flag takes them that way too), no control
character and no surrounding whitespace; a list holds at most 100 labels and no duplicates.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

from registry.errors import InvalidInput

NAME_MAX = 256
DESCRIPTION_MAX = 10_000
NOTES_MAX = 100_000
LABEL_MAX = 256
LABELS_MAX = 100

# The same rules as regular expressions, for the REST API's serializers (RegexValidator) and so
# its OpenAPI schema: no control characters (C0, DEL, C1), except tab and line breaks in
# multi-line text; a label has no comma either and something other than whitespace.
_CONTROL = r"\x00-\x1f\x7f-\x9f"
_CONTROL_BUT_NEWLINES = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
LINE_PATTERN = rf"^[^{_CONTROL}]*[^{_CONTROL}\s][^{_CONTROL}]*$"
MULTILINE_PATTERN = rf"^[^{_CONTROL_BUT_NEWLINES}]*$"
LABEL_PATTERN = rf"^[^,{_CONTROL}]*[^,{_CONTROL}\s][^,{_CONTROL}]*$"


def _has_control(value: str, *, allow_newlines: bool) -> bool:
    allowed = {"\n", "\r", "\t"} if allow_newlines else set()
    return any(unicodedata.category(ch) == "Cc" and ch not in allowed for ch in value)


def validate_text(
    value: Any, field: str, max_length: int, *, required: bool = False, multiline: bool = True
) -> str:
    """``value`` when it is a string of at most ``max_length`` characters, else ``InvalidInput``.

    Arguments:
        field: the field's name in the error (``"description"``).
        required: refuse an empty or all-whitespace value.
        multiline: allow newlines and tabs (descriptions, notes); other control characters,
            NUL included, are always refused (PostgreSQL cannot store NUL in text).

    Raises:
        InvalidInput: ``{field: [why]}``.
    """
    if not isinstance(value, str):
        raise InvalidInput({field: ["Must be a string."]})
    if required and not value.strip():
        raise InvalidInput({field: ["Must not be empty."]})
    if len(value) > max_length:
        raise InvalidInput(
            {field: [f"Must be at most {max_length:,} characters (it has {len(value):,})."]}
        )
    if _has_control(value, allow_newlines=multiline):
        what = "control characters" if multiline else "line breaks or control characters"
        raise InvalidInput({field: [f"Must not contain {what}."]})
    return value


def validate_name(value: Any, field: str = "name") -> str:
    """A display name: 1-256 characters, one line; returned without surrounding whitespace.

    Raises:
        InvalidInput: ``{field: [why]}``.
    """
    text = validate_text(value, field, NAME_MAX, required=True, multiline=False)
    return text.strip()


def validate_labels(value: Any, field: str = "labels") -> list[str]:
    """A list of labels (see the module docstring); returned with duplicates dropped, in order.

    Raises:
        InvalidInput: ``{field: [why]}``, naming the offending label.
    """
    if not isinstance(value, list):
        raise InvalidInput({field: ["Must be a list of strings."]})
    out: list[str] = []
    for label in value:
        if not isinstance(label, str) or not label.strip():
            raise InvalidInput({field: ["Each label must be a non-empty string."]})
        if len(label) > LABEL_MAX:
            raise InvalidInput(
                {field: [f"Label {label[:20]!r}... is longer than {LABEL_MAX} characters."]}
            )
        if label != label.strip():
            raise InvalidInput({field: [f"Label {label!r} must not start or end with spaces."]})
        if "," in label:
            raise InvalidInput({field: [f"Label {label!r} must not contain a comma."]})
        if _has_control(label, allow_newlines=False):
            raise InvalidInput({field: [f"Label {label!r} must not contain control characters."]})
        if label not in out:
            out.append(label)
    if len(out) > LABELS_MAX:
        raise InvalidInput({field: [f"At most {LABELS_MAX} labels (got {len(out)})."]})
    return out


def parse_label_line(text: str) -> list[str]:
    """The labels of a comma-separated line (the dashboard's labels box): split on commas,
    spaces around each trimmed, empty items dropped. Validate the result with
    ``validate_labels``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def check_fields(checks: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each field's check (a callable returning the cleaned value); the cleaned values by
    field, or one ``InvalidInput`` holding every field's errors (so a form shows them all)."""
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for field, check in checks.items():
        try:
            cleaned[field] = check()
        except InvalidInput as exc:
            for key, messages in exc.errors.items():
                errors.setdefault(key, []).extend(messages)
    if errors:
        raise InvalidInput(errors)
    return cleaned
