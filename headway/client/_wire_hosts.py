"""Wire models of the admin's host operations (``/api/v1/hosts/``: list, disable, enable,
remove; ``headway host``), re-exported by ``headway.client._wire``."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from headway.client._wire import WireModel

# The 401 detail of a host token an admin revoked (``headway host-token revoke``, ``headway host
# remove``), as opposed to an unknown key: the agent that gets it stops its trials and exits,
# where an unknown key (a token not issued yet, or a database restored without it) only ends
# its leases until the master accepts a token again.
HOST_TOKEN_REVOKED = "Host token revoked."


class HostStatus(WireModel):
    """A worker host as an admin operates it.

    Attributes:
        name (str): the host (``HEADWAY_HOST_NAME``, its token's name).
        pool (str): the resource pool it serves.
        state (str): ``enabled`` (takes new runs), ``draining`` (takes none; its running runs
            finish) or ``disabled`` (takes none; its running runs were preempted).
        reason (str): why, when the master took it out of service itself (drained after runs
            kept failing to start on it); empty after an admin's enable, disable or drain.
        alive (bool): it heartbeated within ``HEADWAY_HOST_TIMEOUT_SECONDS`` (else lost or
            stopped).
        slots (int): slots it offers; ``slots_in_use`` held by runs placed on it (and shares
            of runs over several hosts).
        heartbeat_at (datetime | None): its last heartbeat (None once its agent stopped);
            ``heartbeat_age_seconds`` how long ago, on the master's clock.
        started_at (datetime): when its agent started.
        address (str): the address its agent reported (empty: an agent that sends none).
        agent_pid (int | None), agent_id (str): the agent process holding the host.
        runs (list[str]): the runs holding its slots, ``"trial T run R"``, oldest first.
    """

    name: str
    pool: str
    state: str
    reason: str = ""
    alive: bool
    slots: int
    slots_in_use: int
    heartbeat_at: datetime | None = None
    heartbeat_age_seconds: float | None = None
    started_at: datetime
    address: str = ""
    agent_pid: int | None = None
    agent_id: str = ""
    runs: list[str] = Field(default_factory=list)


class HostStatusList(WireModel):
    """Every registered host, by name."""

    hosts: list[HostStatus]


class HostRemoved(WireModel):
    """A host the registry forgot; ``token_revoked``: its live host token was revoked with it."""

    name: str
    token_revoked: bool
