"""The webhook tasks of the master's Celery worker (``config.celery`` discovers them)."""

from celery import shared_task


@shared_task(
    name="headway.webhook_deliver",
    # Idempotent: the claim lets one attempt in at a time and a DELIVERED row is never sent.
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def webhook_deliver(delivery_id: int) -> None:
    """One attempt at delivery ``delivery_id`` (``webhooks.delivery.deliver``)."""
    from webhooks.delivery import deliver

    deliver(delivery_id)


@shared_task(name="headway.webhook_sweep", ignore_result=True)
def webhook_sweep() -> None:
    """Send due deliveries whose task was lost and put back those of a lost worker
    (``webhooks.delivery.sweep``; every ``HEADWAY_WEBHOOK_SWEEP_SECONDS`` by Celery beat)."""
    from webhooks.delivery import sweep

    sweep()
