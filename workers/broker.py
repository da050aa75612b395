"""Riding out a broker (Redis) outage: the Celery settings both Celery apps use (the host
agent's, ``workers.celery``; the master's, ``config.celery``) and the Redis transport they run.

A broker outage must cost nothing but delay: a worker keeps its running tasks (a trial's
supervision talks to the master over REST, not through the broker) and reconnects, with
back-off, for as long as the outage lasts.

- ``broker_connection_retry`` / ``broker_connection_retry_on_startup``: reconnect, at start
  and after a loss, instead of shutting down.
- ``broker_connection_max_retries=None``: forever (Celery's default gives up after 100 tries,
  about 50 minutes, and the worker's warm shutdown would then preempt every trial). The tries
  back off from 2 s by 2 s to at most 30 s apart (kombu's ``ensure_connection``), each one
  logged ("consumer: Cannot connect to redis://...: ... Trying again in N seconds").
- ``worker_cancel_long_running_tasks_on_connection_loss=False``: a running trial is not
  cancelled by a connection loss.
- ``broker_transport``: ``RedisTransport`` below, for ``redis://`` and ``rediss://`` brokers,
  with a ``socket_connect_timeout`` of ``REDIS_CONNECT_TIMEOUT_SECONDS`` unless the transport
  options set one.
"""

from __future__ import annotations

import warnings
from typing import Any

from celery.exceptions import CPendingDeprecationWarning
from celery.signals import celeryd_after_setup
from kombu.transport import redis as kombu_redis

REDIS_SCHEMES = ("redis://", "rediss://")


@celeryd_after_setup.connect
def quiet_cancel_warning(**kwargs: Any) -> None:
    """Celery warns at every connection loss that the default of
    ``worker_cancel_long_running_tasks_on_connection_loss`` changes in Celery 6, even where it
    is set: here it is (False), so the warning's dozen lines would only bury the reconnection's.
    Added once the worker set up its logging, which turns every pending-deprecation warning on.
    """
    warnings.filterwarnings(
        "ignore",
        message=r"\s*In Celery 5\.1 we introduced an optional breaking change",
        category=CPendingDeprecationWarning,
    )


# A broker host that is down or cut off drops connection attempts rather than refusing them:
# without a bound each attempt waited for the kernel's (about two minutes), once per publish
# retry, inside the request that placed a run.
REDIS_CONNECT_TIMEOUT_SECONDS = 5.0


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, still able to reach the broker after its connection was lost.

    After a connection loss Celery's worker consumer collects the connection (kombu detaches
    the transport from it: ``transport.client = None``) and then closes it. The channel's
    unacknowledged messages (a running trial's: ``acks_late``) then needed a client: the
    close's restore and, once the trial ended, its acknowledgement. kombu builds that client
    from ``transport.client`` and raised ``AttributeError: 'NoneType' object has no attribute
    'hostname'``, no connection error, so the worker stopped with "Unrecoverable error" and
    never came back. This channel builds its client from the connection it was opened on
    instead: the close's restore fails as the connection error it is (the broker is away;
    Celery ignores it and reconnects) and the late acknowledgement reaches the broker once it
    is back, so the message leaves its unacknowledged set and is not delivered again.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened_on = self.connection.client  # kombu's Connection: host, port, password...

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            # The transport was detached (see class): only this channel still uses it.
            self.connection.client = self._opened_on
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]
        return params


class RedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with ``RedisChannel``."""

    Channel = RedisChannel


def celery_broker_settings(
    broker_url: str, transport_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Celery settings (lower-case names, for ``app.conf.update``) of an app on
    ``broker_url`` whose ``broker_transport_options`` are ``transport_options`` (see module);
    the filesystem transport (embedded setup) keeps kombu's."""
    found: dict[str, Any] = {
        "broker_connection_retry": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_transport_options": dict(transport_options or {}),
    }
    if broker_url.startswith(REDIS_SCHEMES):
        found["broker_transport"] = f"{__name__}:RedisTransport"
        found["broker_transport_options"].setdefault(
            "socket_connect_timeout", REDIS_CONNECT_TIMEOUT_SECONDS
        )
    return found
