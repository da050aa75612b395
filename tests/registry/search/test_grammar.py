"""The filter language's parse: syntax, precedence, values, and errors that say where."""

import datetime as dt

import pytest

from registry.search.grammar import And, Condition, FilterSyntaxError, Not, parse


def cond(field, op, *values):
    return (field, op, values)


def shape(node):
    """The tree without positions, for readable expectations."""
    if isinstance(node, Condition):
        return (node.field, node.op, node.values)
    if isinstance(node, Not):
        return ("not", shape(node.part))
    kind = "and" if isinstance(node, And) else "or"
    return (kind, *[shape(part) for part in node.parts])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", cond("a", "=", 1)),
        ("a == 1", cond("a", "=", 1)),
        ("a != 1", cond("a", "!=", 1)),
        ("a < 1e-3", cond("a", "<", 0.001)),
        ("a <= -2", cond("a", "<=", -2)),
        ("a > .5", cond("a", ">", 0.5)),
        ("a >= 3.0", cond("a", ">=", 3.0)),
        ("state in (ERROR, CANCELED)", cond("state", "in", "ERROR", "CANCELED")),
        ("state NOT IN (ERROR)", cond("state", "not_in", "ERROR")),
        ('labels contains "baseline"', cond("labels", "contains", "baseline")),
        ("labels contains 'it''s'", None),
        ("end_time is null", cond("end_time", "is_null")),
        ("end_time is not null", cond("end_time", "not_null")),
        ("hparams.lr exists", cond("hparams.lr", "not_null")),
        ("owner = alice", cond("owner", "=", "alice")),
        ('hparams.optim.name = "adam"', cond("hparams.optim.name", "=", "adam")),
        ("hparams.bn = true", cond("hparams.bn", "=", True)),
        ("hparams.bn = FALSE", cond("hparams.bn", "=", False)),
        ("start_time >= 2026-11-01", cond("start_time", ">=", dt.date(2026, 11, 1))),
        (
            "start_time < 2026-11-01T12:30Z",
            cond("start_time", "<", dt.datetime(2026, 11, 1, 12, 30, tzinfo=dt.UTC)),
        ),
        ("`val/loss` < 2", cond("val/loss", "<", 2)),
        ("val/loss < 2", cond("val/loss", "<", 2)),
        ('name = "say \\"hi\\""', cond("name", "=", 'say "hi"')),
        # A field whose name begins with a keyword is a field.
        ("notes_count = 1", cond("notes_count", "=", 1)),
        ("order = 1", cond("order", "=", 1)),
    ],
)
def test_it_parses_each_operator_and_value(text, expected):
    if expected is None:  # SQL's doubled quote is not an escape here: it does not parse
        with pytest.raises(FilterSyntaxError):
            parse(text)
        return
    assert shape(parse(text)) == expected


def test_and_binds_tighter_than_or_and_not_tighter_than_both():
    assert shape(parse("a = 1 or b = 2 and not c = 3")) == (
        "or",
        ("a", "=", (1,)),
        ("and", ("b", "=", (2,)), ("not", ("c", "=", (3,)))),
    )
    assert shape(parse("(a = 1 or b = 2) and c = 3")) == (
        "and",
        ("or", ("a", "=", (1,)), ("b", "=", (2,))),
        ("c", "=", (3,)),
    )
    assert shape(parse("NOT (a = 1 AND b = 2)")) == (
        "not",
        ("and", ("a", "=", (1,)), ("b", "=", (2,))),
    )


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("a >", 4, "a value"),
        ("a > 1 and", 10, "a field name"),
        ("(a > 1", 7, '")"'),
        ("a ~ 1", 3, "an operator"),
        ("a > 1 b", 7, "and, or"),
        ("x in ()", 7, "a value"),
        ("", 1, "a field name"),
        ("   ", 1, "a field name"),
    ],
)
def test_a_syntax_error_says_where_and_what_was_expected(text, position, expected):
    with pytest.raises(FilterSyntaxError) as caught:
        parse(text)
    message = str(caught.value)
    assert message.startswith(f"At position {position}:") and expected in message


def test_impossible_dates_and_long_filters_are_refused():
    with pytest.raises(FilterSyntaxError, match="Invalid date"):
        parse("start_time > 2026-02-30")
    with pytest.raises(FilterSyntaxError, match="Longer than"):
        parse("a = 1 or " * 600 + "a = 1")
