"""Metric values made JSON-safe, and the sinks reports go to (registry thread or local log).

The registry sink follows Determined's ``core._metrics``: reports are
queued by the training thread and POSTed in batches by one background thread that blocks on the
queue (never spins) and retries transient failures forever; the server is idempotent on
``(trial, group, steps_completed)``, so a retried batch never duplicates.
"""

from __future__ import annotations

import collections
import json
import logging
import sys
import threading
import time
from typing import Any, Protocol

import orjson
import requests

from headway.client import APIError, MasterUnreachableError, RegistryAPI, Session
from headway.metric_values import MAX_INT, MAX_TEXT_CHARS, encode_float

logger = logging.getLogger("headway.core")

# Tunables (module level so tests and benchmarks can shorten them).
BATCH_SIZE = 1000  # reports waiting that wake the sender before its interval
MAX_BATCH_SIZE = 10_000  # reports per POST at most (the registry's limit per batch)
FLUSH_INTERVAL_S = 0.5  # longest a report waits before the sender wakes
RETRY_BACKOFF_S = 0.1  # first retry delay; doubles per failure
RETRY_BACKOFF_MAX_S = 10.0


def json_safe_metrics(
    metrics: Any, what: str = "metric", *, metric_limits: bool = True
) -> dict[str, Any]:
    """Return a JSON-safe deep copy of a metrics dict.

    Accepts Python numbers, bools, strings, None, numpy scalars and arrays, torch tensors
    (``.item()`` for one element, ``.tolist()`` otherwise), and lists/tuples/dicts of those.
    NaN and ±inf become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (docs/rest-api.md).
    With ``metric_limits`` (metric values, not checkpoint metadata), strings longer than
    ``headway.metric_values.MAX_TEXT_CHARS`` and integers beyond a float's range are refused
    here, before the batch is sent (the registry would refuse the whole batch with a 400).

    Raises:
        TypeError: naming the key, e.g. ``metric 'foo' has a value of type object that is not
            JSON-serializable``, or when ``metrics`` is not a dict with string keys.
        ValueError: a NUL character in a name or a string value (the registry answers 400);
            with ``metric_limits``, a string over ``MAX_TEXT_CHARS`` characters or an integer
            over ``MAX_INT`` in magnitude, naming the metric.
    """
    if not isinstance(metrics, dict):
        raise TypeError(f"metrics must be a dict, got {type(metrics).__name__}")
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"{what} names must be strings, got {key!r}")
        if "\x00" in key:
            raise ValueError(f"{what} name {key!r} contains a NUL character")
        out[key] = _convert(value, key, what, metric_limits)
    return out


def _convert(value: Any, key: str, what: str, limits: bool) -> Any:
    # Exact types first: this runs for every metric of every step.
    kind = type(value)
    if kind is float:
        return encode_float(value)
    if kind is _tensor_type[0] and not value.dim():
        # A 0-d torch tensor (a training loop's loss): its number, without the general path.
        value = value.item()
        kind = type(value)
        if kind is float:
            return encode_float(value)
    if kind is str or isinstance(value, str):
        return _check_text(value, key, what, limits)
    if kind is bool or value is None:
        return value
    if kind is int or isinstance(value, int):
        if limits and not -MAX_INT <= value <= MAX_INT:
            raise ValueError(f"{what} {key!r} has an integer beyond a 64-bit float's range")
        return value
    if isinstance(value, float):  # a subclass (numpy.float64): sent as a plain float
        return encode_float(float(value))
    if isinstance(value, (list, tuple)):
        return [_convert(item, key, what, limits) for item in value]
    if isinstance(value, dict):
        return _convert_dict(value, key, what, limits)
    plain = _tensor_like_to_python(value)
    if plain is not _UNCONVERTIBLE:
        return _convert(plain, key, what, limits)
    raise TypeError(
        f"{what} {key!r} has a value of type {type(value).__name__} that is not JSON-serializable"
    )


def _check_text(value: str, key: str, what: str, limits: bool) -> str:
    if "\x00" in value:  # PostgreSQL cannot store it: the registry refuses the batch
        raise ValueError(f"{what} {key!r} has a string value with a NUL character")
    if limits and len(value) > MAX_TEXT_CHARS:
        raise ValueError(
            f"{what} {key!r} has a string value of {len(value)} characters; metric text"
            f" values may be at most {MAX_TEXT_CHARS} (the registry refuses longer ones)"
        )
    return value


def _convert_dict(value: dict[Any, Any], key: str, what: str, limits: bool) -> dict[str, Any]:
    converted = {}
    for sub_key, item in value.items():
        if not isinstance(sub_key, str):
            raise TypeError(f"{what} {key!r} has a non-string key {sub_key!r}")
        if "\x00" in sub_key:
            raise ValueError(f"{what} {key!r} has a key with a NUL character")
        converted[sub_key] = _convert(item, key, what, limits)
    return converted


_UNCONVERTIBLE = object()
# [torch.Tensor] once a tensor was converted (torch is never imported by this module).
_tensor_type: list[Any] = [None]


def _tensor_like_to_python(value: Any) -> Any:
    # numpy/torch are looked up in sys.modules, never imported: if the user's value is one of
    # their types, the module is already loaded, and headway.core stays light to import.
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.generic, np.ndarray)):
        return value.item() if value.ndim == 0 else value.tolist()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        _tensor_type[0] = torch.Tensor
        # .item() needs no detach (it copies the value out); a detach costs a new tensor.
        return value.item() if value.dim() == 0 else value.detach().cpu().tolist()
    return _UNCONVERTIBLE


_second_cache: list[Any] = [-1, ""]  # [whole second, its "YYYY-MM-DDTHH:MM:SS" text]


def utc_timestamp() -> str:
    """Now as ISO-8601 UTC with microseconds and a ``Z`` suffix (the registry's format).

    Called for every report: the date-and-time text is formatted once per second and reused.
    """
    now = time.time()
    second = int(now)
    if second != _second_cache[0]:
        _second_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_cache[0] = second
    micro = min(999_999, round((now - second) * 1_000_000))
    return f"{_second_cache[1]}.{micro:06d}Z"


class MetricSink(Protocol):
    """Where ``TrainContext`` sends finished reports (registry thread or local log)."""

    def start(self) -> None: ...

    def submit(self, report: dict[str, Any], *, raise_pending: bool = True) -> None: ...

    def flush(self, timeout: float | None = None) -> bool: ...

    def close(self, timeout: float) -> Exception | None: ...


class LocalMetricSink:
    """Local mode: log each report and keep it in ``reports`` (for tests and notebooks)."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def start(self) -> None:
        """Nothing to start."""

    def submit(self, report: dict[str, Any], *, raise_pending: bool = True) -> None:
        """Log the report at INFO and keep it in memory (``raise_pending``: nothing to raise)."""
        self.reports.append(report)
        logger.info(
            "%s metrics at step %d: %s",
            report["group"],
            report["steps_completed"],
            report["metrics"],
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Nothing is buffered."""
        return True

    def close(self, timeout: float) -> Exception | None:
        """Nothing to stop."""
        return None


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _encode(report: dict[str, Any]) -> bytes:
    """A report as compact JSON bytes (values are already JSON-safe: no NaN literals).

    orjson takes ~0.1 us for a one-metric report where ``json`` takes ~3 us (it builds a new C
    encoder per call), and this runs once per report in the training loop's thread. What orjson
    refuses (integers beyond 64 bits, subclasses of float such as ``numpy.float64``, strings with
    lone surrogates) goes through ``json``, which writes them as it always did.
    """
    try:
        return orjson.dumps(report)
    except TypeError:  # orjson.JSONEncodeError
        return _ENCODER.encode(report).encode()


class RegistryMetricReporter:
    """Managed mode: a background thread that sends the reports in batches
    (``RegistryAPI.trial_metrics_report``).

    ``submit`` appends to a deque (atomic under the GIL: no lock, no wake-up per report), so
    reporting every step costs the training loop a few microseconds. The thread wakes when
    ``BATCH_SIZE`` reports wait, ``FLUSH_INTERVAL_S`` after it last slept, or on
    ``flush()``/``close()``, and then sends everything waiting in POSTs of up to
    ``MAX_BATCH_SIZE`` reports: the busier the loop, the larger (and cheaper per report) the
    batches. Connection errors, timeouts, 429 and 5xx are retried with capped exponential
    backoff, in order, forever or until the registry has been failing for ``outage_seconds``:
    then a ``MasterUnreachableError`` is raised by the next ``submit()`` (the trial fails with
    it) and what is queued is dropped. Any other error answer (400: a caller bug) drops that
    batch, is logged as an error, and is raised by the next ``submit()`` or returned by
    ``close()``.

    Arguments:
        session (Session): an authenticated session used by this thread only.
        trial_id (int): the trial reported for.
        outage_seconds (float | None): how long the registry may stay unreachable (None:
            forever).
    """

    def __init__(
        self, session: Session, trial_id: int, outage_seconds: float | None = None
    ) -> None:
        self._api = RegistryAPI.from_session(session)
        self._trial_id = trial_id
        self._outage_seconds = outage_seconds
        self._gave_up = False
        self._pending: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="headway-metric-reporter", daemon=True
        )
        self._abort = threading.Event()
        self._error: Exception | None = None
        self._started = False
        self._closed = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start the thread (idempotent)."""
        with self._start_lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def submit(self, report: dict[str, Any], *, raise_pending: bool = True) -> None:
        """Queue one JSON-safe report; raise the error of an earlier rejected batch, if any.

        With ``raise_pending=False`` (a background thread's report, e.g. system metrics) the
        report is dropped while an error waits, so the error reaches the training thread.

        The report is encoded to JSON here, in the caller's thread (a few microseconds): the
        sender then only joins bytes, so it holds the GIL briefly and does not stall a
        training loop whose torch calls release and re-take it (the convoy effect).
        """
        if self._closed:
            raise RuntimeError("metrics reported after the Core API context was closed")
        if self._error is not None:
            if not raise_pending:
                return
            self._raise_pending()
        if not self._started:
            self.start()
        self._pending.append(_encode(report))
        if len(self._pending) >= BATCH_SIZE and not self._wake.is_set():
            self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Send everything queued so far; return False if ``timeout`` s passed first."""
        if not self._started or self._closed:
            return True
        marker = _Flush()
        self._pending.append(marker)
        self._wake.set()
        return marker.done.wait(timeout)

    def close(self, timeout: float) -> Exception | None:
        """Deliver what is queued (waiting at most ``timeout`` s), stop the thread.

        Returns the error of a rejected batch not yet raised, else None.
        """
        if self._closed:
            return None
        self._closed = True
        if self._started:
            self._pending.append(_STOP)
            self._wake.set()
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning(
                    "metric reporter: gave up after %.0f s with about %d reports undelivered "
                    "(registry unreachable?)",
                    timeout,
                    len(self._pending),
                )
                self._abort.set()
        error, self._error = self._error, None
        return error

    def _raise_pending(self) -> None:
        error = self._error
        if error is not None:
            self._error = None
            raise error

    def _run(self) -> None:
        while True:
            self._wake.wait(FLUSH_INTERVAL_S)  # sleeps while idle: no spinning
            self._wake.clear()
            while self._pending:
                batch: list[bytes] = []
                marker: _Flush | None = None
                stop = False
                while self._pending and len(batch) < MAX_BATCH_SIZE:
                    item = self._pending.popleft()
                    if item is _STOP:
                        stop = True
                        break
                    if isinstance(item, _Flush):
                        marker = item  # done once the reports queued before it are sent
                        break
                    batch.append(item)
                if batch:
                    self._send(batch)
                if marker is not None:
                    marker.done.set()
                if stop:
                    return

    def _send(self, batch: list[bytes]) -> None:
        body = b'{"reports":[' + b",".join(batch) + b"]}"
        delay = RETRY_BACKOFF_S
        failures = 0
        first_failure = time.monotonic()
        while not self._gave_up:
            try:
                self._api.trial_metrics_report(self._trial_id, body)
                if failures:
                    logger.info("metric reporter: delivered after %d retries", failures)
                return
            except APIError as exc:
                if exc.status is not None and exc.status < 500 and exc.status != 429:
                    logger.error(
                        "metric reporter: the registry rejected %d reports (dropped): %s",
                        len(batch),
                        exc,
                    )
                    self._error = exc
                    return
                error: Exception = exc
            except requests.RequestException as exc:  # read timeouts are not ConnectionErrors
                error = exc
            failures += 1
            failing_for = time.monotonic() - first_failure
            if self._outage_seconds is not None and failing_for >= self._outage_seconds:
                self._give_up(failing_for, error)
                break
            log = logger.warning if failures in (1, 10) or failures % 100 == 0 else logger.debug
            log(
                "metric reporter: attempt %d failed (%s); retrying in %.1f s",
                failures,
                error,
                delay,
            )
            if self._abort.wait(delay):
                logger.error("metric reporter: dropped %d reports at shutdown", len(batch))
                return
            delay = min(delay * 2, RETRY_BACKOFF_MAX_S)
        if self._gave_up:
            logger.error("metric reporter: dropped %d reports (registry unreachable)", len(batch))

    def _give_up(self, failing_for: float, error: Exception) -> None:
        self._gave_up = True
        self._error = MasterUnreachableError(
            f"metric reporter: the registry stayed unreachable for {failing_for:.0f} s (outage "
            f"budget HEADWAY_MASTER_OUTAGE_SECONDS={self._outage_seconds:g}); last failure: "
            f"{error}"
        )
