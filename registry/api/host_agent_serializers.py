"""Request bodies of the host agent's routes (answers are ``headway.client`` wire models)."""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

from registry.api.model_serializers import StrictBooleanField, StrictCharField, StrictSerializer
from registry.models.host_token import HOST_NAME_PATTERN

# Bounds of the integer columns these land in (PostgreSQL integer).
_INT32 = 2**31 - 1
_INT64 = 2**63 - 1  # a PositiveBigIntegerField's range (log positions)
MAX_SLOTS = 4096  # more devices than any host has; bounds the body and the JSON column
MAX_LOG_LINES = 5000  # lines per batch (the worker sends at most 500 a flush)


class RunRefSerializer(StrictSerializer):
    """A run by its ids."""

    trial_id = serializers.IntegerField(min_value=1, max_value=2**63 - 1)
    run_id = serializers.IntegerField(min_value=1, max_value=_INT32)


class ShareRefSerializer(RunRefSerializer):
    """A share of a run over several hosts by its ids."""

    node_rank = serializers.IntegerField(min_value=1, max_value=_INT32)


class HostHeartbeatRequestSerializer(StrictSerializer):
    """A host's registration and heartbeat (``registry.scheduling.host_heartbeat``): its pool,
    its slots (one device id each, lowest first), whether they are GPUs, when it started.

    ``runs`` and ``shares`` list the leases the host holds: each is renewed (its heartbeat
    set) when it is placed on this host and not EXITED; others are ignored.

    ``namespace`` is the cluster namespace the host's agent serves (its ``HEADWAY_QUEUE``; the
    master's when omitted): only a master of that namespace places runs on it. It is fixed at
    the host's first beat: a beat naming another is a 409 naming ``namespace``. The host's
    queue is ``<namespace>.host.<name>`` of the token's name, never a name the host picks (a
    host cannot divert another host's runs to itself)."""

    pool = StrictCharField(max_length=200)
    namespace = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$",
        required=False,
        error_messages={"invalid": "letters, digits, '.', '_' or '-' (a Celery queue prefix)"},
    )
    devices = serializers.ListField(
        child=StrictCharField(max_length=64), max_length=MAX_SLOTS, allow_empty=True
    )
    gpu = StrictBooleanField()
    started_at = serializers.DateTimeField()
    redispatch = StrictBooleanField(required=False, default=False)
    # The leases this host holds (docs/scheduling.md): renewed first, with the host row.
    runs = serializers.ListField(
        child=RunRefSerializer(), max_length=MAX_SLOTS, required=False, default=list
    )
    shares = serializers.ListField(
        child=ShareRefSerializer(), max_length=MAX_SLOTS, required=False, default=list
    )
    # The agent process (a uuid it draws at start, its pid and address): a second agent of a
    # host whose holder still heartbeats is refused (409). Omitted: not checked.
    agent_id = serializers.RegexField(
        r"^[A-Za-z0-9-]{1,64}$",
        required=False,
        default="",
        error_messages={"invalid": "letters, digits and '-' (a uuid), at most 64"},
    )
    agent_pid = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False)
    agent_address = StrictCharField(max_length=255, required=False, default="", allow_blank=True)


class HostTokenCreateRequestSerializer(StrictSerializer):
    """A new host token: the host name it stands for."""

    name = StrictCharField(
        max_length=200,
        validators=[
            RegexValidator(
                rf"^{HOST_NAME_PATTERN}$",
                "Must start with a letter or digit and hold only letters, digits, '.', '_', '-'.",
            )
        ],
    )


class HostDisableRequestSerializer(StrictSerializer):
    """An admin takes a host out of placement: ``drain`` true lets its running runs finish
    there; false (the default) preempts them (they resume elsewhere)."""

    drain = StrictBooleanField(required=False, default=False)


class ClaimRequestSerializer(StrictSerializer):
    """Who claims: the worker's name (``host:pid``), stored on the run or share."""

    worker = StrictCharField(max_length=255)


class ExitRequestSerializer(StrictSerializer):
    """A process's exit code; null when the host stopped it (its shutdown, a lost peer) rather
    than the trial's code failing: the lifecycle re-queues without counting a restart."""

    exit_code = serializers.IntegerField(min_value=-_INT32, max_value=_INT32, allow_null=True)


class RunExitRequestSerializer(ExitRequestSerializer):
    """A run's exit; ``reason``: why a run its host stopped (exit code null) was lost, e.g.
    ``host gpu-b lost its lease``, for the trial's message."""

    reason = StrictCharField(max_length=500, required=False, allow_blank=True, default="")


class LogLineRequestSerializer(StrictSerializer):
    """One output line, with when it was printed (default: when it arrives) and, optionally,
    its ``position`` in the run's output (its line number, or the byte offset just past it in
    the run's output file): the idempotency key of a resent batch (``append_logs``)."""

    message = StrictCharField(allow_blank=True, trim_whitespace=False)
    timestamp = serializers.DateTimeField(required=False, allow_null=True, default=None)
    position = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=_INT64
    )


class LogBatchRequestSerializer(StrictSerializer):
    """A batch of output lines of one run (or share)."""

    lines = serializers.ListField(child=LogLineRequestSerializer(), max_length=MAX_LOG_LINES)


class RendezvousRequestSerializer(StrictSerializer):
    """Where the chief's host accepts its run's other hosts (torchrun's static rendezvous)."""

    # Not trimmed: a host name or IP address has no white space, and a trimmed value would let
    # through a request longer than the schema's maxLength says.
    address = StrictCharField(
        max_length=253,
        trim_whitespace=False,
        validators=[RegexValidator(r"^\S+$", "An address has no white space.")],
    )
    port = serializers.IntegerField(min_value=1, max_value=65535)
