"""The host agent's routes declared as data: ``HostRoute`` and the one view class serving them.

Every route of ``/api/v1/host-agent/`` has the same shape: only host tokens pass
(``IsHostAgent``), the body (if any) is validated by a serializer, a handler calls
``registry.lifecycle.host_agent`` for the token's host, and the answer is a
``headway.client`` wire model (or bytes of one media type, or 204). A route is one
``HostRoute`` row of ``registry.api.views.host_agent.ROUTES`` (made by the route groups
``on_host``, ``on_run`` and ``on_share``) plus its handler; ``host_urls`` makes the URL
patterns, one generated ``HostAgentView`` subclass per row, whose method carries the route's
OpenAPI entry (summary and description from the handler's docstring, body, answer).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.urls import URLPattern, path
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from headway.client._wire import WireModel
from registry.api.answers import answer
from registry.api.host_auth import IsHostAgent, host_token_of

TAG = ["host agent"]


RUN_PATH = "trials/<db_id:trial_id>/runs/<db_id:run_id>/"
SHARE_PATH = RUN_PATH + "shares/<db_id:node_rank>/"


@dataclass(frozen=True)
class HostRoute:
    """One host-agent route (one method per path).

    Attributes:
        path: under ``host-agent/``, in Django's syntax (``RUN_PATH + "claim/"``).
        name: the URL name (``host-run-claim``).
        method: ``"get"`` or ``"post"``.
        handler: called as ``handler(host, **path_ids, **body)``: the token's host name, the
            path's converted ids, and the validated body's fields as keyword arguments; it
            returns the answer's data. Its docstring documents the route: the first line,
            less its period, is the OpenAPI summary, the rest the description.
        body: the serializer of the request body (400 naming the field); None: no body.
        answer: a wire model (200 JSON, the handler returns its fields or the model), a media
            type (200, the handler returns the bytes), or None (204, the handler returns None).
    """

    path: str
    name: str
    method: Literal["get", "post"]
    handler: Callable[..., Any]
    body: type[Serializer] | None = None
    answer: type[WireModel] | str | None = None

    @property
    def summary(self) -> str:
        """The handler docstring's first line, less its period."""
        return inspect.cleandoc(self.handler.__doc__ or "").split("\n", 1)[0].removesuffix(".")

    @property
    def description(self) -> str:
        """The handler docstring after its first line and the blank line."""
        return inspect.cleandoc(self.handler.__doc__ or "").partition("\n\n")[2]


@dataclass(frozen=True)
class RouteGroup:
    """Routes under one path prefix, whose URL names share one prefix: called with a segment
    (``"claim/"``), it makes the ``HostRoute`` at ``path + segment`` named ``name + segment``
    less its slash (``host-run-claim``), so a route's path and name cannot drift apart."""

    path: str
    name: str

    def __call__(
        self,
        segment: str,
        method: Literal["get", "post"],
        handler: Callable[..., Any],
        body: type[Serializer] | None = None,
        answer: type[WireModel] | str | None = None,
    ) -> HostRoute:
        """The route ``segment`` of this group (the other arguments as ``HostRoute``'s)."""
        name = self.name + segment.strip("/")
        return HostRoute(self.path + segment, name, method, handler, body, answer)


on_host = RouteGroup("", "host-")  # the host itself (``heartbeat/``)
on_run = RouteGroup(RUN_PATH, "host-run-")  # a run placed on the host
on_share = RouteGroup(SHARE_PATH, "host-share-")  # the host's share of a run over several hosts


class HostAgentView(APIView):
    """Base of the host routes: host tokens only; ``self.host`` is the token's host name."""

    permission_classes = (IsHostAgent,)
    route: ClassVar[HostRoute]

    @property
    def host(self) -> str:
        token = host_token_of(self.request)
        assert token is not None  # IsHostAgent let only host tokens in
        return token.name

    def body(self, serializer_class: type[Serializer]) -> dict[str, Any]:
        """The request body validated by ``serializer_class`` (400 naming the field)."""
        serializer = serializer_class(data=self.request.data, context={"host": self.host})
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def serve(self, ids: dict[str, int]) -> HttpResponse:
        """The route's handler called for this request, its result as the route's answer."""
        route = self.route
        fields = self.body(route.body) if route.body is not None else {}
        result = route.handler(self.host, **ids, **fields)
        if route.answer is None:
            return Response(status=204)
        if isinstance(route.answer, str):
            return HttpResponse(result, content_type=route.answer)
        return answer(route.answer, result)


def _responses(route: HostRoute) -> dict[Any, Any]:
    if route.answer is None:
        return {204: None}
    if isinstance(route.answer, str):
        return {(200, route.answer): bytes}
    return {200: route.answer}


def host_view(route: HostRoute) -> type[HostAgentView]:
    """The ``HostAgentView`` subclass serving ``route``, documented by ``extend_schema``.

    Raises:
        ImproperlyConfigured: the handler's docstring has no summary line and description.
    """
    if not (route.summary and route.description):
        raise ImproperlyConfigured(
            f"host route {route.name}: its handler's docstring needs a summary line, a blank "
            "line and a description"
        )

    def method(self: HostAgentView, request: Request, **ids: int) -> HttpResponse:
        return self.serve(ids)

    method.__doc__ = route.description
    method.__name__ = method.__qualname__ = route.method
    schema: dict[str, Any] = {"tags": TAG, "summary": route.summary}
    if route.method == "post":
        schema["request"] = route.body
    documented = extend_schema(**schema, responses=_responses(route))(method)
    class_name = "".join(part.title() for part in route.name.split("-")) + "View"
    attrs = {route.method: documented, "route": route, "name": route.summary}
    return type(class_name, (HostAgentView,), {"__module__": __name__, **attrs})


def host_urls(routes: Iterable[HostRoute]) -> list[URLPattern]:
    """One URL pattern per route, in the order given (Django tries them in that order)."""
    return [path(r.path, host_view(r).as_view(), name=r.name) for r in routes]
