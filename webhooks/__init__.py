"""Webhooks: the registry's events (experiment and trial state changes, completed checkpoints,
model versions, model aliases) POSTed to the URLs admins register, signed, retried, recorded.

An event is written as one delivery row per matching webhook in the transaction of the change
that causes it (an outbox, ``webhooks.events``); the master's Celery worker sends them
(``webhooks.delivery``, ``webhooks.tasks``). See docs/webhooks.md.
"""
