"""Metric report bodies: ``{"reports": [...]}`` validated from the request's JSON bytes.

pydantic validates the bytes straight into ``TypedDict``s (no ``json.loads`` and no model
instances first: a tenth of DRF's cost for 10,000-report batches); names, values and timestamps
get the checks a JSON Schema cannot express. The schema of the OpenAPI document is generated
from the same validator.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC
from typing import Annotated, Any, NotRequired

from django.conf import settings
from pydantic import (
    AwareDatetime,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    with_config,
)
from pydantic import ValidationError as PydanticValidationError
from typing_extensions import TypedDict

from headway.metric_values import value_problem
from registry.errors import InvalidInput

MAX_REPORTS_PER_BATCH = 10_000

GroupName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
MetricName = Annotated[str, StringConstraints(min_length=1, max_length=256)]


def _date_time_text(value: Any) -> Any:
    # pydantic's lax datetime also takes a number (Unix seconds); the schema says an ISO 8601
    # string, and a client sending seconds meant something we would guess at.
    if isinstance(value, int | float):
        raise ValueError("a date-time string (ISO 8601), not a number")
    return value


@with_config(ConfigDict(extra="forbid"))
class ReportIn(TypedDict):
    """One report as posted by the SDK (see docs/rest-api.md); validated as a plain dict.

    A ``TypedDict`` rather than a model: validating 10,000 reports into dicts (straight from
    the request's JSON) costs a fifth of building model instances.
    """

    group: GroupName
    # 64-bit and 32-bit columns: larger numbers are a 400, not an overflow (500). Strict: JSON
    # numbers only, so `true` or "5" is a 400 as the schema says (pydantic's lax mode takes them).
    steps_completed: Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]
    metrics: dict[MetricName, Any]
    run_id: NotRequired[Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)] | None]
    # A double-precision column: finite, so the stored value reads back as JSON.
    epoch: NotRequired[Annotated[float, Field(strict=True, allow_inf_nan=False)] | None]
    timestamp: NotRequired[Annotated[AwareDatetime, BeforeValidator(_date_time_text)] | None]


@with_config(ConfigDict(extra="forbid"))
class _Batch(TypedDict):
    reports: Annotated[list[ReportIn], Field(max_length=MAX_REPORTS_PER_BATCH)]


_batch_adapter = TypeAdapter(_Batch)


def _loc_to_field(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
        return "Unknown field; allowed: reports."
    if err["type"] == "too_long" and tuple(err["loc"]) == ("reports",):
        return f"At most {MAX_REPORTS_PER_BATCH} reports per batch."
    if err["type"] == "missing" and tuple(err["loc"]) == ("reports",):
        return "This field is required (a list of reports)."
    return err["msg"]


def parse_reports(payload: Any) -> list[ReportIn]:
    """Validate a POSTed ``{"reports": [...]}`` body (decoded JSON, or the raw JSON bytes).

    Raw bytes are validated without building Python objects first (pydantic's JSON parser,
    which also takes the bare ``NaN``/``Infinity`` literals). Metric values are any JSON
    value; non-finite floats are encoded as strings on storage, and the strings
    ``"NaN"``/``"Infinity"``/``"-Infinity"`` are kept as they are, so both spellings store
    and read back (as gaps) the same way.

    Raises:
        InvalidInput: naming ``reports[i].field`` (or ``reports[i].metrics.KEY``), also for more
            than ``HEADWAY_MAX_METRIC_NAMES_PER_REPORT`` metrics, a NUL character, a text value
            over ``MAX_TEXT_CHARS`` characters or a timestamp out of range in UTC.
    """
    try:
        if isinstance(payload, bytes | str):
            batch = _batch_adapter.validate_json(payload)
        else:
            batch = _batch_adapter.validate_python(payload)
    except PydanticValidationError as exc:
        errors: dict[str, list[str]] = {}
        for err in exc.errors():
            errors.setdefault(_loc_to_field(err["loc"]) or "reports", []).append(_message(err))
        raise InvalidInput(errors) from None
    _check_names_and_values(batch["reports"])
    return batch["reports"]


def _check_names_and_values(reports: list[ReportIn]) -> None:
    """At most ``HEADWAY_MAX_METRIC_NAMES_PER_REPORT`` metrics a report, no NUL character in
    names, every value storable (``headway.metric_values.value_problem``: no NUL, text of at
    most ``MAX_TEXT_CHARS`` characters, integers a float can hold), and every timestamp
    expressible in UTC (``9999-12-31T23:59:59-23:00`` is not; PostgreSQL refuses offsets past
    15:59). A timestamp is converted to UTC here, once. One bad value would fail the whole
    batch's insert, so the batch is refused naming it.

    Raises:
        InvalidInput: naming ``reports[i].metrics``, ``reports[i].metrics.KEY`` or
            ``reports[i].timestamp``.
    """
    limit = settings.HEADWAY_MAX_METRIC_NAMES_PER_REPORT
    for i, report in enumerate(reports):
        metrics = report["metrics"]
        if len(metrics) > limit:
            raise InvalidInput(
                {f"reports[{i}].metrics": [f"{len(metrics)} metrics; at most {limit} a report."]}
            )
        for name, value in metrics.items():
            if "\x00" in name:
                problem: str | None = "NUL characters are not allowed in metrics."
            elif type(value) is float:  # the usual value: nothing to check
                continue
            else:
                problem = value_problem(value)
            if problem is not None:
                shown = name.replace("\x00", "\\x00")
                raise InvalidInput({f"reports[{i}].metrics.{shown}": [problem]})
        stamp = report.get("timestamp")
        if stamp is not None:
            try:
                report["timestamp"] = stamp.astimezone(UTC)
            except OverflowError:
                raise InvalidInput(
                    {f"reports[{i}].timestamp": ["Out of range once converted to UTC."]}
                ) from None


def report_batch_json_schema() -> dict[str, Any]:
    """The JSON Schema of a ``{"reports": [...]}`` body, self-contained (no ``$ref``), for the
    OpenAPI schema: generated from the validator itself, so the two cannot drift."""
    schema = _batch_adapter.json_schema()
    report = schema.pop("$defs")["ReportIn"]
    schema["properties"]["reports"]["items"] = report
    return schema
