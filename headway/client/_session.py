"""``Session``: one authenticated connection to the registry, shared by CLI and SDK."""

from __future__ import annotations

import logging
import os
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import requests
from requests.auth import AuthBase

from headway.client._errors import (
    APIError,
    MasterUnreachableError,
    describe_error_body,
    error_for_status,
)

logger = logging.getLogger("headway.client")

# Retry only what a retry can fix: connection failures and gateway/overload answers.
_RETRY_STATUSES = frozenset({502, 503, 504, 429})
BACKOFF_CAP_S = 10.0  # longest wait between two attempts
RETRY_AFTER_CAP_S = 60.0  # longest wait a server's Retry-After may ask for


def retry_after_seconds(response: requests.Response | None) -> float | None:
    """Seconds a 429/503 answer's ``Retry-After`` header asks to wait (RFC 9110 10.2.3; only
    the delay-seconds form, which the registry sends), capped at ``RETRY_AFTER_CAP_S``; None
    when there is no usable header."""
    raw = response.headers.get("Retry-After") if response is not None else None
    try:
        seconds = float(raw) if raw is not None else None
    except ValueError:
        return None
    if seconds is None or not seconds >= 0:
        return None
    return min(seconds, RETRY_AFTER_CAP_S)


class TokenAuth(AuthBase):
    """``Authorization: Token <key>`` on every request (the registry's token scheme).

    As a requests auth (not a session header), requests never swaps it for ``~/.netrc``
    credentials and drops it on a redirect to another host (a presigned S3 URL).
    """

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Token {self.token}"
        return request


def http_session(token: str | None) -> requests.Session:
    """The ``requests.Session`` under a ``Session``: its token as ``TokenAuth``, and the
    environment read once when no proxy is configured.

    With ``trust_env`` on, requests re-reads the proxy variables (walking ``os.environ``),
    ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` and ``~/.netrc`` on every call: a quarter of a
    call's client CPU (0.15 of 0.6 ms, docs/performance.md). Without proxies that reading finds
    nothing but the CA bundle, read here once; with proxies (``*_proxy`` variables, or the
    system's) requests keeps resolving them per URL, ``no_proxy`` and redirects included.
    """
    http = requests.Session()
    if token:
        http.auth = TokenAuth(token)
    if not urllib.request.getproxies():
        http.trust_env = False
        bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        if bundle:
            http.verify = bundle
    return http


class Session:
    """Authenticated JSON calls to ``{master_url}/api/v1/...`` with retries and typed errors.

    Arguments:
        master_url (str): base URL of the registry, e.g. ``http://127.0.0.1:8000``.
        token (str | None): user or trial token, sent as ``Authorization: Token <key>``.
        max_retries (int): attempts after the first for connection errors and 429/502/503/504.
        backoff (float): first retry delay in seconds; doubles each attempt (capped at 10 s).
            A 429/503 with ``Retry-After`` (the registry's answer when its database is busy
            or restarting) waits at least that long.
        timeout (float): per-request timeout in seconds.
        outage_seconds (float | None): when set, ``max_retries`` is ignored: connection errors,
            timeouts and 429/502/503/504 are retried (capped exponential backoff) until the
            registry answers or this many seconds passed since the call's first failure; then
            ``MasterUnreachableError``. Trial processes use ``HEADWAY_MASTER_OUTAGE_SECONDS``.

    Raises (from every call): ``BadRequestError`` (400/413), ``UnauthenticatedError`` (401/403),
    ``NotFoundError`` (404), ``ConflictError`` (409), ``MasterUnreachableError`` when the outage
    budget ran out, ``APIError`` otherwise or when the server stayed unreachable after the
    retries.
    """

    def __init__(
        self,
        master_url: str,
        token: str | None = None,
        *,
        max_retries: int = 5,
        backoff: float = 0.5,
        timeout: float = 30.0,
        outage_seconds: float | None = None,
    ) -> None:
        self.master_url = master_url.rstrip("/")
        self.token = token
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.outage_seconds = outage_seconds
        self._http = http_session(token)

    def with_retry(self, max_retries: int) -> Session:
        """Return a copy sharing the token with another retry budget (and no outage budget)."""
        return Session(
            self.master_url,
            self.token,
            max_retries=max_retries,
            backoff=self.backoff,
            timeout=self.timeout,
        )

    def url(self, path: str) -> str:
        """Absolute URL for an API path such as ``experiments/1/`` or ``/api/v1/trials/2/``."""
        if path.startswith("http://") or path.startswith("https://"):
            return path
        if not path.startswith("/api/"):
            path = "/api/v1/" + path.lstrip("/")
        return self.master_url + path

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Send a request, retrying transient failures; return the successful response."""
        kwargs.setdefault("timeout", self.timeout)
        url = self.url(path)
        delay = self.backoff
        first_failure: float | None = None
        attempt = 0
        while True:
            error: Exception | None = None
            try:
                response: requests.Response | None = self._http.request(method, url, **kwargs)
            except requests.ConnectionError as exc:
                response, error = None, exc
            except requests.Timeout as exc:
                # A read timeout may have reached the server: only sessions for idempotent
                # calls (the trial's, with an outage budget) send it again.
                if self.outage_seconds is None:
                    raise
                response, error = None, exc
            if response is not None and response.status_code not in _RETRY_STATUSES:
                break
            failure = str(error) if response is None else f"HTTP {response.status_code}"
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            if self._out_of_retries(attempt, now - first_failure):
                if response is not None and self.outage_seconds is None:
                    break  # the last answer's error is raised below, as before
                raise self._unreachable(now - first_failure, failure) from error
            wait = max(delay, retry_after_seconds(response) or 0.0)
            logger.log(
                logging.WARNING if attempt in (0, 10) or attempt % 100 == 0 else logging.DEBUG,
                "registry %s %s failed (%s); retrying in %.1f s",
                method,
                url,
                failure,
                wait,
            )
            time.sleep(wait)
            delay = min(delay * 2, BACKOFF_CAP_S)
            attempt += 1
        assert response is not None
        if first_failure is not None and attempt >= 10:
            logger.warning("registry reachable again after %d retries", attempt)
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            message = f"{method} {path}: HTTP {response.status_code}: {describe_error_body(body)}"
            raise error_for_status(response.status_code, message, body)
        return response

    def _out_of_retries(self, attempt: int, failing_for: float) -> bool:
        if self.outage_seconds is None:
            return attempt >= self.max_retries
        return failing_for >= self.outage_seconds

    def _unreachable(self, failing_for: float, failure: str) -> APIError:
        if self.outage_seconds is None:
            return APIError(f"cannot reach {self.master_url}: {failure}")
        return MasterUnreachableError(
            f"the registry at {self.master_url} stayed unreachable for {failing_for:.0f} s "
            f"(outage budget HEADWAY_MASTER_OUTAGE_SECONDS={self.outage_seconds:g}); "
            f"last failure: {failure}"
        )

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET a JSON document."""
        return self.request("GET", path, params=params).json()

    def post(self, path: str, json: Any = None) -> Any:
        """POST a JSON body; return the decoded answer (None for an empty body)."""
        response = self.request("POST", path, json=json)
        return response.json() if response.content else None

    def put(self, path: str, json: Any = None) -> Any:
        """PUT a JSON body; return the decoded answer (None for an empty body)."""
        response = self.request("PUT", path, json=json)
        return response.json() if response.content else None

    def delete(self, path: str) -> Any:
        """DELETE a resource; return the decoded answer (None for an empty body, e.g. 204)."""
        response = self.request("DELETE", path)
        return response.json() if response.content else None

    def paginate(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        """Yield every item of a paginated list endpoint, following ``next`` links."""
        page = self.get(path, params=params)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self.get(page["next"])

    def stream(self, path: str, params: dict[str, Any] | None = None) -> requests.Response:
        """GET with ``stream=True`` for downloads; caller iterates ``iter_content`` and closes."""
        return self.request("GET", path, params=params, stream=True)


def fetch_all(session: Session, path: str, params: dict[str, Any] | None = None) -> list[Any]:
    """Every item of a list endpoint, following ``next`` links of paginated answers."""
    page = session.get(path, params=params)
    if isinstance(page, list):
        return page
    items = list(page.get("results", []))
    while page.get("next"):
        page = session.get(page["next"])
        items.extend(page.get("results", []))
    return items
