"""The plumbing ``RegistryAPI``'s methods share: a route name and its path arguments become one
``Session`` call (token, retries with backoff, typed errors), the answer a wire model."""

from __future__ import annotations

from typing import Any, Self, TypeVar

import requests

from headway.client._lazy_wire import wire
from headway.client._routes import ROUTES
from headway.client._session import Session, fetch_all

Model = TypeVar("Model", bound="wire.WireModel")  # a string: wire loads on first use


class APIBase:
    """A ``Session`` and the helpers that send one route's request through it.

    Arguments:
        master_url (str): e.g. ``http://127.0.0.1:8000``.
        token (str | None): a user token, a run token or a host token (``hwh_...``).
    """

    def __init__(self, master_url: str, token: str | None = None) -> None:
        self.session = Session(master_url, token)

    @classmethod
    def from_session(cls, session: Session) -> Self:
        """A client over an existing ``Session`` (its token and retry policy)."""
        api = cls.__new__(cls)
        api.session = session
        return api

    @staticmethod
    def path(route: str, method: str, **args: Any) -> str:
        """The path of ``route`` with its placeholders filled; ``method`` must be the route's."""
        expected, template = ROUTES[route]
        assert method == expected, f"{route} is {expected}, not {method}"
        return template.format(**args)

    # The host agent's calls: the response as sent (its bytes, or JSON for ``_call``).

    def _request(self, route: str, body: Any = None, **path: Any) -> Any:
        method, template = ROUTES[route]
        return self.session.request(
            method, template.format(**path), json=body if method != "GET" else None
        )

    def _call(self, route: str, model: type[Model], body: Any = None, **path: Any) -> Model:
        return model.model_validate(self._request(route, body, **path).json())

    # The SDK's and the CLI's calls, through the Session's JSON helpers (None: an empty body).

    def _get(self, route: str, params: dict[str, Any] | None = None, **path: Any) -> Any:
        return self.session.get(self.path(route, "GET", **path), params=params)

    def _post(self, route: str, body: Any = None, **path: Any) -> Any:
        return self.session.post(self.path(route, "POST", **path), json=body)

    def _put(self, route: str, body: Any = None, **path: Any) -> Any:
        return self.session.put(self.path(route, "PUT", **path), json=body)

    def _delete(self, route: str, **path: Any) -> Any:
        return self.session.delete(self.path(route, "DELETE", **path))

    def _list(self, route: str, params: dict[str, Any] | None = None, **path: Any) -> list[Any]:
        """Every item of a list route, following ``next`` links of paginated answers."""
        return fetch_all(self.session, self.path(route, "GET", **path), params)

    def _stream(
        self, route: str, params: dict[str, Any] | None = None, **path: Any
    ) -> requests.Response:
        return self.session.stream(self.path(route, "GET", **path), params)
