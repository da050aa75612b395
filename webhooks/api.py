"""``/api/v1/webhooks/``: admins create, list, describe, change, delete and test webhooks and
read their deliveries. Everyone else gets 403. ``headway webhook`` calls these routes."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from headway.client import _wire as wire
from registry.api.answers import answer
from registry.api.host_auth import IsAdmin
from webhooks.delivery import deliver
from webhooks.events import record
from webhooks.models import TEST_EVENT, Delivery, Webhook
from webhooks.serializers import DeliveryQuerySerializer, WebhookWriteSerializer, new_secret

TAG = ["webhooks"]


class IsWebhookAdmin(IsAdmin):
    """Admins only (``registry.authz.is_admin``), with a token or a session."""

    message = "Only an admin may manage webhooks."


def delivery_info(row: Delivery) -> dict[str, Any]:
    """A delivery as ``wire.WebhookDelivery``'s fields."""
    return {
        "id": row.pk,
        "event_id": str(row.event_id),
        "event_type": row.event_type,
        "state": row.state,
        "attempts": row.attempts,
        "last_status_code": row.last_status_code,
        "last_error": row.last_error,
        "last_attempt_at": row.last_attempt_at,
        "next_attempt_at": row.next_attempt_at,
        "delivered_at": row.delivered_at,
        "created_at": row.created_at,
    }


def webhook_info(hook: Webhook, last: Delivery | None = None) -> dict[str, Any]:
    """A webhook as ``wire.WebhookInfo``'s fields (``last``: its newest delivery, if known)."""
    if last is None:
        last = hook.deliveries.order_by("-id").first()
    return {
        "id": hook.pk,
        "name": hook.name,
        "url": hook.url,
        "events": hook.events,
        "format": hook.format,
        "enabled": hook.enabled,
        "workspace": hook.workspace.name if hook.workspace else None,
        "workspace_id": hook.workspace_id,
        "created_by": hook.created_by.username if hook.created_by else None,
        "created_at": hook.created_at,
        "last_delivery": delivery_info(last) if last is not None else None,
    }


def webhooks_with_last_delivery() -> list[tuple[Webhook, Delivery | None]]:
    """Every webhook with its newest delivery (two queries: the webhooks, then the newest
    delivery of each)."""
    hooks = list(Webhook.objects.select_related("created_by", "workspace"))
    top = Delivery.objects.values("webhook_id").annotate(top=Max("id")).values("top")
    newest = {row.webhook_id: row for row in Delivery.objects.filter(id__in=top)} if hooks else {}
    return [(hook, newest.get(hook.pk)) for hook in hooks]


class WebhookListView(APIView):
    permission_classes = (IsWebhookAdmin,)

    @extend_schema(
        tags=TAG,
        summary="Webhooks",
        operation_id="webhooks_list",
        responses={200: wire.WebhookList},
    )
    def get(self, request):
        """Every webhook with its newest delivery (never a secret)."""
        rows = webhooks_with_last_delivery()
        return answer(wire.WebhookList, {"webhooks": [webhook_info(h, d) for h, d in rows]})

    @extend_schema(
        tags=TAG,
        summary="Create a webhook",
        operation_id="webhooks_create",
        request=WebhookWriteSerializer,
        responses={201: wire.WebhookCreated},
    )
    def post(self, request):
        """A webhook for ``url`` receiving ``events``; its ``secret`` (drawn when left out) is
        in this answer only; ``workspace`` (an id or a name) limits it to that workspace's
        events. 400 naming the field for an unknown field, event type, format or workspace,
        a duplicate name, or a URL the SSRF rules refuse."""
        serializer = WebhookWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.setdefault("secret", new_secret())
        hook = Webhook.objects.create(created_by=request.user, **data)
        return answer(wire.WebhookCreated, webhook_info(hook) | {"secret": hook.secret}, status=201)


class WebhookDetailView(APIView):
    permission_classes = (IsWebhookAdmin,)

    @extend_schema(
        tags=TAG,
        summary="A webhook",
        operation_id="webhooks_retrieve",
        responses={200: wire.WebhookInfo},
    )
    def get(self, request, webhook_id: int):
        """The webhook and its newest delivery."""
        hook = get_object_or_404(Webhook.objects.select_related("workspace"), pk=webhook_id)
        return answer(wire.WebhookInfo, webhook_info(hook))

    @extend_schema(
        tags=TAG,
        summary="Change a webhook",
        operation_id="webhooks_partial_update",
        request=WebhookWriteSerializer,
        responses={200: wire.WebhookInfo},
    )
    def patch(self, request, webhook_id: int):
        """Change any of ``name``, ``url``, ``events``, ``format``, ``secret``, ``enabled``,
        ``workspace`` (null: every workspace's events again); deliveries already recorded keep the body they were recorded with."""
        hook = get_object_or_404(Webhook, pk=webhook_id)
        serializer = WebhookWriteSerializer(data=request.data, instance=hook, partial=True)
        serializer.is_valid(raise_exception=True)
        for field, value in serializer.validated_data.items():
            setattr(hook, field, value)
        hook.save()
        return answer(wire.WebhookInfo, webhook_info(hook))

    @extend_schema(
        tags=TAG, summary="Delete a webhook", operation_id="webhooks_destroy", responses={204: None}
    )
    def delete(self, request, webhook_id: int):
        """Delete the webhook and its deliveries (pending ones are not sent)."""
        get_object_or_404(Webhook, pk=webhook_id).delete()
        return Response(status=204)


class WebhookDeliveriesView(APIView):
    permission_classes = (IsWebhookAdmin,)

    @extend_schema(
        tags=TAG,
        summary="A webhook's deliveries",
        operation_id="webhooks_deliveries",
        parameters=[OpenApiParameter("limit", int, description="at most this many (1-500, 50)")],
        responses={200: wire.WebhookDeliveryList},
    )
    def get(self, request, webhook_id: int):
        """The webhook's deliveries, newest first, with their attempts, last status and error."""
        hook = get_object_or_404(Webhook, pk=webhook_id)
        query = DeliveryQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        rows = hook.deliveries.order_by("-id")[: query.validated_data["limit"]]
        return answer(wire.WebhookDeliveryList, {"deliveries": [delivery_info(r) for r in rows]})


class WebhookTestView(APIView):
    permission_classes = (IsWebhookAdmin,)

    @extend_schema(
        tags=TAG,
        summary="Send a test event",
        operation_id="webhooks_test",
        request=None,
        responses={200: wire.WebhookDelivery},
    )
    def post(self, request, webhook_id: int):
        """Record a ``webhook.test`` event for this webhook and make its first attempt now; the
        answer is the delivery after it (DELIVERED, or PENDING with the status and error of the
        failure and its retry scheduled)."""
        hook = get_object_or_404(Webhook, pk=webhook_id)
        with transaction.atomic():
            (row,) = record(TEST_EVENT, {"webhook": hook.name}, only=hook, send=False)
        done = deliver(row.pk) or get_object_or_404(Delivery, pk=row.pk)
        return answer(wire.WebhookDelivery, delivery_info(done))
