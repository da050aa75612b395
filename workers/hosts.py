"""This worker's host: what it offers (slots, devices), its registration and its heartbeat.

Steps, from Celery's ``worker_ready`` (``workers.tasks``):
1. Detect the host: ``HEADWAY_HOST_NAME``; ``HEADWAY_SLOTS`` CPU slots when set, else the GPUs
   (``CUDA_VISIBLE_DEVICES`` when set, else ``torch.cuda.device_count()``), else one CPU slot.
2. Make sure the worker consumes the host's queue ``<HEADWAY_QUEUE>.host.<name>`` (normally
   already on its ``-Q``; see ``workers.command``).
3. Register the host with the master (``POST host-agent/heartbeat/`` with the host token: an
   upsert; the first beat has the master send again the runs already placed here and run a
   placement pass without waiting; a later beat does only when it changed what can be placed
   here: the host back alive, other slots or pool).
4. A daemon thread beats every ``HEADWAY_HOST_HEARTBEAT_SECONDS`` (the master's, at a fixed
   rate), listing the leases of the runs this worker holds: the master renews them with the
   host row. The lease watchdog (``workers.leases``) stops the trials whose lease could not be
   renewed in time; a beat the master refuses (401: the token was revoked) ends every lease at
   once, and the agent exits once they stopped (``on_refused``).
Each agent process draws an instance id (a uuid) and sends it, its pid and address with every
beat: a second agent started for a host whose agent still heartbeats is refused (409 naming the
other) and exits; a later refusal (another agent took the host over after this one went silent
for the host timeout) stops this one's trials and exits, as a revoked token does.
On warm shutdown ``stop()`` ends the thread and marks the host stopped before the running
trials are preempted, so none of them is placed back on this host.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celery.exceptions import WorkerShutdown

from headway.client import BadRequestError, ConflictError, wire
from headway.client._errors import describe_error_body
from workers import agent_state, leases, link, reattach
from workers.config import settings

logger = logging.getLogger("headway.worker")


@dataclass(frozen=True)
class HostSpec:
    """What a host offers: ``slots`` devices named by ``devices`` (lowest first).

    ``gpu``: the devices are CUDA device ids (``"0"``, ``"1"`` or what ``CUDA_VISIBLE_DEVICES``
    lists); otherwise they are CPU slot names ``"cpu0"``, ``"cpu1"``...
    """

    name: str
    slots: int
    devices: tuple[str, ...]
    gpu: bool


def host_queue(name: str, namespace: str | None = None) -> str:
    """The Celery queue of host ``name`` under ``namespace`` (default: ``HEADWAY_QUEUE``), as
    the master names it (``registry.lifecycle.host_agent.host_queue``)."""
    return wire.host_queue_name(namespace or settings.HEADWAY_QUEUE, name)


def celery_command(queue: str, concurrency: int) -> list[str]:
    """The host agent's Celery worker command line: it consumes only the host's ``queue`` with
    ``concurrency`` threads (threads pool: each task waits on a process; slots + 1)."""
    return [
        sys.executable, "-m", "celery", "-A", "workers", "worker",
        "-Q", queue,
        "--pool=threads", f"--concurrency={concurrency}",
        "--without-gossip", "--without-mingle", "-l", "info",
    ]  # fmt: skip


def visible_gpus() -> list[str]:
    """CUDA device ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set (``""``: none),
    else ``"0"`` .. ``"N-1"`` for ``torch.cuda.device_count()`` (torch imported only here)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = []
        for item in (part.strip() for part in listed.split(",")):
            if not item or item.startswith("-"):
                break  # CUDA ignores everything from the first invalid entry on ("-1": none)
            ids.append(item)
        return ids
    try:
        import torch
    except ImportError:
        return []
    return [str(index) for index in range(torch.cuda.device_count())]


def detect_host() -> HostSpec:
    """This host's spec from the settings and the devices visible to this process."""
    name = settings.HEADWAY_HOST_NAME
    if settings.HEADWAY_SLOTS is not None:
        count = settings.HEADWAY_SLOTS
        return HostSpec(name, count, tuple(f"cpu{i}" for i in range(count)), gpu=False)
    gpus = visible_gpus()
    if gpus:
        return HostSpec(name, len(gpus), tuple(gpus), gpu=True)
    return HostSpec(name, 1, ("cpu0",), gpu=False)


class HostHeartbeat:
    """Registers ``spec`` with the master and keeps it alive from a daemon thread.

    Arguments:
        spec (HostSpec): the host to register.
        interval (float): seconds between heartbeats until the master's first answer sets
            them (``HEADWAY_HOST_HEARTBEAT_SECONDS``).
        on_refused (Callable[[str], None] | None): called once (with the reason) after the
            master refused this host for good (its token revoked, or another agent holds the
            host) and every lease was ended; the Celery agent exits there. None: keep beating.
        agent_id (str | None): this agent's instance id (default: a new uuid).
    """

    def __init__(
        self,
        spec: HostSpec,
        interval: float,
        on_refused: Callable[[str], None] | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.spec = spec
        self.on_refused = on_refused
        self._gave_up = False
        self._registered = False  # the master accepted a beat of this agent
        # This agent process, as the master tells two agents of one host apart (a restarted
        # agent takes over its dead predecessor's: workers.reattach).
        self.agent_id = agent_id or uuid.uuid4().hex
        self.agent_address = _address()
        self.interval = interval
        self.queue = host_queue(spec.name)
        self.started_at: datetime = datetime.now(UTC)
        self._stop = threading.Event()
        self._redispatched = False  # asked once, with the first beat the master answered
        self._thread: threading.Thread | None = None
        self.refused = ""  # the master's refusal of this host's token, while it lasts
        self.watchdog = leases.Watchdog()

    def skip_redispatch(self) -> None:
        """Never ask the master to send this host's placed runs again: a host without a Celery
        queue (a batch job's node process) runs its one run itself."""
        self._redispatched = True

    def _send(
        self, runs: list[tuple[int, int]], shares: list[tuple[int, int, int]]
    ) -> wire.HostInfo:
        return link.api().host_heartbeat(
            pool=settings.HEADWAY_RESOURCE_POOL,
            devices=self.spec.devices,
            gpu=self.spec.gpu,
            started_at=self.started_at,
            namespace=settings.HEADWAY_QUEUE,
            redispatch=not self._redispatched,
            runs=runs,
            shares=shares,
            agent_id=self.agent_id,
            agent_pid=os.getpid(),
            agent_address=self.agent_address,
        )

    def renew(self) -> bool:
        """One heartbeat: renew this worker's leases and the host row; False (logged) when the
        master could not be reached or refused the token (then every lease ends now).

        Raises:
            BadRequestError: the master refused the registration's fields.
            ConflictError: another agent holds this host, before this one ever registered.
        """
        try:
            info = leases.renew(self._send)
        except BadRequestError:
            raise  # e.g. a pool the admin's file does not list: the worker cannot serve
        except ConflictError as exc:
            if not self._registered:
                raise  # a second agent of a live host: it must not start (``start``)
            self._give_up(f"{_detail(exc)}; another agent took this host over")
            return False
        except Exception as exc:
            if link.is_refused(exc):
                why = link.refusal(exc)
                revoked = link.is_revoked(exc)
                if not self.refused:
                    logger.critical(
                        "%s: %s; stopping every trial of this host",
                        "host token revoked" if revoked else "host token refused",
                        why,
                    )
                self.refused = why
                leases.expire_all(why)
                # An unknown key (not issued yet, a database restored without it) may be
                # accepted again: the agent waits for that; a revoked one never is.
                if revoked:
                    self._give_up(f"host token revoked: {why}")
            else:
                logger.exception("host %s: heartbeat failed; retrying", self.spec.name)
            return False
        self._registered = True
        if self.refused:
            logger.warning("host %s: the master accepts its token again", self.spec.name)
            self.refused = ""
        if not self._redispatched:
            self._redispatched = True
            if info.redispatched:
                logger.info(
                    "host %s: %s placed run(s) sent again", self.spec.name, info.redispatched
                )
        if info.queue != self.queue:
            logger.error(
                "host %s: the master sends its runs to %s, this worker consumes %s: set "
                "HEADWAY_HOST_NAME to the host token's name (%s) and HEADWAY_QUEUE as on the master",
                self.spec.name, info.queue, self.queue, info.name,
            )  # fmt: skip
        if info.stale_runs or info.stale_shares:
            # Given away while this host was cut off: stopped before anything new is placed here.
            leases.expire_stale(info.stale_runs, info.stale_shares)
        settings.adopt_timing(
            info.heartbeat_seconds,
            info.lease_seconds,
            info.kill_grace_seconds,
            info.outage_tolerance_seconds,
        )
        self.interval = info.heartbeat_seconds
        return True

    def _give_up(self, why: str) -> None:
        # Every lease ends (the watchdog stops their processes within a tick), then the owner
        # of this heartbeat is told once (the Celery agent exits).
        leases.expire_all(why)
        if self.on_refused is None or self._gave_up:
            return
        self._gave_up = True
        self.on_refused(why)

    def start(self) -> None:
        """Beat once now (register; the master re-sends the runs already placed here and runs
        a placement pass), then every ``interval`` seconds from a daemon thread, with the lease
        watchdog in another one.

        Raises:
            BadRequestError: the master refused the host's registration (the message names
                the field, e.g. a ``pool`` its admin's pools file does not list).
            ConflictError: another agent of this host heartbeats (the message names it).
        """
        self.renew()
        self.watchdog.start()
        self._thread = threading.Thread(target=self._run, name="headway-host", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # A fixed rate: the next renewal is due one interval after the previous one started.
        due = time.monotonic()
        while True:
            due += self.interval
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            due = max(due, time.monotonic())  # after a stall: one renewal now, then on the beat
            try:
                self.renew()
            except BadRequestError:
                logger.exception("host %s: the master refused its heartbeat", self.spec.name)
            except ConflictError as exc:  # refused before it ever registered (master was away)
                self._give_up(f"this agent is refused: {_detail(exc)}")

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread, then mark the host stopped (no more runs are placed here)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.watchdog.stop()
        link.api().host_stopped()


_current: HostHeartbeat | None = None


def start(consumer: Any = None) -> HostHeartbeat:
    """Detect, register and heartbeat this worker's host; ``consumer`` is Celery's (to make sure
    it consumes the host queue). Called once per worker process, from ``worker_ready``."""
    global _current
    if _current is not None:
        return _current  # once per process: a second ready signal changes nothing
    spec = detect_host()
    # A predecessor killed on this host: take over its instance id and its runs, whose leases
    # the first beat then renews (workers.reattach).
    agent_id, runs = agent_state.claim(uuid.uuid4().hex)
    adopted = reattach.hold(runs)
    heartbeat = HostHeartbeat(
        spec, settings.HEADWAY_HOST_HEARTBEAT_SECONDS, on_refused=_exit_worker, agent_id=agent_id
    )
    if consumer is not None:
        _consume(consumer, heartbeat.queue, spec.slots)
    try:
        try:
            heartbeat.start()
        except Exception:
            reattach.release(adopted)
            raise
    except BadRequestError as exc:
        # A signal handler's Exception would only be logged: WorkerShutdown stops the worker.
        logger.critical("%s: this worker stops", exc)
        raise WorkerShutdown(str(exc)) from None
    except ConflictError as exc:
        why = f"this agent is refused: {_detail(exc)}"
        logger.critical("%s; this worker stops", why)
        raise WorkerShutdown(why) from None
    _current = heartbeat
    if adopted:
        logger.warning(
            "host %s: re-attaching %s run(s) of its previous agent", spec.name, len(adopted)
        )
        reattach.start(adopted)
    logger.info(
        "host %s: %s slot(s) %s (%s), queue %s, heartbeat every %g s",
        spec.name,
        spec.slots,
        ",".join(spec.devices) or "-",
        "GPU" if spec.gpu else "CPU",
        heartbeat.queue,
        heartbeat.interval,
    )
    return heartbeat


def _address() -> str:
    """This agent's address for the master's list and refusals (the host name when the
    advertised address cannot be found)."""
    from workers.address import host_address

    try:
        return host_address()
    except Exception:
        return socket.gethostname()


def _detail(exc: ConflictError) -> str:
    return describe_error_body(exc.body) if exc.body else str(exc)


def _exit_worker(why: str) -> None:
    """Stop this Celery worker with exit status 1 once its running tasks ended (their trials
    are being stopped: their leases ended). The flag is the one Celery's own SIGTERM handler
    sets for a warm shutdown; the consumer's loop raises ``WorkerShutdown`` from it."""
    from celery.worker import state

    logger.critical("%s: this worker exits once its trials stopped", why)
    state.should_stop = 1  # type: ignore[assignment]  # typed None in Celery, read as an exit status


def _consume(consumer: Any, queue: str, slots: int) -> None:
    # The worker's -Q normally names the host queue already; a worker started by hand (or
    # under another host name) still gets the queue its host is registered with.
    if not consumer.task_consumer.consuming_from(queue):
        logger.warning("the worker's -Q lacks its host queue %s; consuming it now", queue)
        consumer.add_task_queue(queue)
    concurrency = getattr(getattr(consumer, "controller", None), "concurrency", None)
    if isinstance(concurrency, int) and concurrency < slots + 1:
        logger.warning(
            "worker concurrency %s < slots + 1 (%s): runs placed here may wait for a thread",
            concurrency,
            slots + 1,
        )


def stop() -> None:
    """Warm shutdown: stop heartbeating and mark this worker's host stopped (if registered)."""
    global _current
    if _current is not None:
        try:
            _current.stop()
        except Exception:
            logger.exception("could not mark host %s stopped", _current.spec.name)
        _current = None
