"""``Session``: one authenticated connection to the registry, shared by CLI and SDK."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import requests

from headway.client._errors import APIError, describe_error_body, error_for_status

logger = logging.getLogger("headway.client")

# Retry only what a retry can fix: connection failures and gateway/overload answers.
_RETRY_STATUSES = frozenset({502, 503, 504, 429})


class Session:
    """Authenticated JSON calls to ``{master_url}/api/v1/...`` with retries and typed errors.

    Arguments:
        master_url (str): base URL of the registry, e.g. ``http://127.0.0.1:8000``.
        token (str | None): user or trial token, sent as ``Authorization: Token <key>``.
        max_retries (int): attempts after the first for connection errors and 429/502/503/504.
        backoff (float): first retry delay in seconds; doubles each attempt (capped at 10 s).
        timeout (float): per-request timeout in seconds.

    Raises (from every call): ``BadRequestError`` (400/413), ``UnauthenticatedError`` (401/403),
    ``NotFoundError`` (404), ``ConflictError`` (409), ``APIError`` otherwise or when the server
    stayed unreachable after the retries.
    """

    def __init__(
        self,
        master_url: str,
        token: str | None = None,
        *,
        max_retries: int = 5,
        backoff: float = 0.5,
        timeout: float = 30.0,
    ) -> None:
        self.master_url = master_url.rstrip("/")
        self.token = token
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self._http = requests.Session()
        if token:
            self._http.headers["Authorization"] = f"Token {token}"

    def with_retry(self, max_retries: int) -> Session:
        """Return a copy sharing the token with another retry budget."""
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
        for attempt in range(self.max_retries + 1):
            try:
                response = self._http.request(method, url, **kwargs)
            except requests.ConnectionError as exc:
                if attempt == self.max_retries:
                    raise APIError(f"cannot reach {self.master_url}: {exc}") from exc
            else:
                if response.status_code not in _RETRY_STATUSES or attempt == self.max_retries:
                    break
            logger.debug("retrying %s %s in %.1fs", method, url, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            message = f"{method} {path}: HTTP {response.status_code}: {describe_error_body(body)}"
            raise error_for_status(response.status_code, message, body)
        return response

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET a JSON document."""
        return self.request("GET", path, params=params).json()

    def post(self, path: str, json: Any = None) -> Any:
        """POST a JSON body; return the decoded answer (None for an empty body)."""
        response = self.request("POST", path, json=json)
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
