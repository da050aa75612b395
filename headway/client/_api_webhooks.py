"""``RegistryAPI``'s webhook routes (admins; ``headway webhook``). Answers are the wire models
the server builds them from (``headway.client._wire_webhooks``)."""

from __future__ import annotations

from typing import Any

from headway.client._api_base import APIBase
from headway.client._lazy_wire import wire


class WebhookAPI(APIBase):
    """An admin's webhook calls (see ``RegistryAPI``)."""

    def webhook_create(
        self,
        *,
        name: str,
        url: str,
        events: list[str],
        format: str = "default",
        secret: str | None = None,
        workspace: str | int | None = None,
    ) -> wire.WebhookCreated:
        """Create a webhook; the answer holds its signing secret (shown only then). ``secret``:
        16-128 characters of the admin's own, else the master draws one. ``workspace``: a
        workspace's name (str) or id (int) whose events alone it receives (None: every
        workspace's)."""
        body: dict[str, Any] = {"name": name, "url": url, "events": events, "format": format}
        if secret is not None:
            body["secret"] = secret
        if workspace is not None:
            body["workspace"] = workspace
        return wire.WebhookCreated.model_validate(self._post("webhook_create", body))

    def webhook_list(self) -> list[wire.WebhookInfo]:
        """Every webhook with its newest delivery."""
        return wire.WebhookList.model_validate(self._get("webhook_list")).webhooks

    def webhook_get(self, webhook_id: int) -> wire.WebhookInfo:
        """One webhook (404: ``NotFoundError``)."""
        return wire.WebhookInfo.model_validate(self._get("webhook_get", webhook_id=webhook_id))

    def webhook_delete(self, webhook_id: int) -> None:
        """Delete a webhook and its deliveries."""
        self._delete("webhook_delete", webhook_id=webhook_id)

    def webhook_deliveries(self, webhook_id: int, limit: int = 50) -> list[wire.WebhookDelivery]:
        """The webhook's newest ``limit`` deliveries, newest first."""
        answer = self._get("webhook_deliveries", {"limit": limit}, webhook_id=webhook_id)
        return wire.WebhookDeliveryList.model_validate(answer).deliveries

    def webhook_test(self, webhook_id: int) -> wire.WebhookDelivery:
        """Send a ``webhook.test`` event now; the delivery after its first attempt."""
        answer = self._post("webhook_test", webhook_id=webhook_id)
        return wire.WebhookDelivery.model_validate(answer)
