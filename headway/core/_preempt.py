"""``PreemptContext``: learn that the registry wants this trial to stop (pause, cancel).

Semantics of Determined's ``core.PreemptContext``: ``should_preempt()`` turns True once and stays
True; the trial should checkpoint and exit. The registry is polled by a background thread, so the
call in the training loop is an attribute read.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import pathlib
import threading
import time

import requests
from pydantic import ValidationError

from headway.client import APIError, NotFoundError, RegistryAPI, Session
from headway.core._distributed import DistributedContext

logger = logging.getLogger("headway.core")

LISTENING_FILE = "preempt-listening"
"""Created by the watcher thread in the run's directory (next to ``$HEADWAY_CLUSTER_INFO``) as
it starts: the worker, shutting down, gives a run with this file its grace period to checkpoint,
and stops at once one without it (a process still starting can see no preemption)."""


def _announce_listening() -> None:
    """Create ``LISTENING_FILE`` in the run's directory; nothing outside the cluster."""
    info = os.environ.get("HEADWAY_CLUSTER_INFO")
    if info:
        with contextlib.suppress(OSError):  # then the worker stops the run without a grace
            (pathlib.Path(info).parent / LISTENING_FILE).touch()


class PreemptMode(enum.Enum):
    """How the workers of a distributed trial learn about preemption.

    - ``WorkersAskChief`` (default): only the chief polls the registry; every
      ``should_preempt()`` call broadcasts the chief's answer, so all ranks must call it at the
      same points (the answer is then identical on every rank).
    - ``ChiefOnly``: only the chief polls and only the chief may call ``should_preempt()``.
    - ``WorkersAskMaster``: every rank polls the registry itself; no collective per call.
    """

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"
    WorkersAskMaster = "WORKERS_ASK_MASTER"


class PreemptionWatcher:
    """Background thread long-polling ``RegistryAPI.trial_preempt_poll`` (``timeout=S``).

    The registry holds each request open until the run gets a stop request or ``S`` seconds
    pass, so a pause reaches ``should_preempt`` within about 0.1 s while an idle trial makes one
    request per ``S`` seconds. ``should_preempt`` is a plain attribute: False until the registry
    answers ``{"should_preempt": true}``, then True forever (the thread stops). Failed polls, and
    answers that came back early without a stop (a registry without long-poll), wait
    ``interval`` seconds on an Event, so ``close()`` wakes the thread.

    Arguments:
        session (Session): used by this thread only.
        trial_id (int), run_id (int): the run being watched.
        interval (float): seconds to wait after a failed or early-returning poll.
        long_poll (int): seconds the registry may hold one request (<= 60, below the session's
            timeout).
    """

    def __init__(
        self,
        session: Session,
        trial_id: int,
        run_id: int,
        interval: float = 1.0,
        long_poll: int = 20,
    ) -> None:
        self.should_preempt = False
        self._api = RegistryAPI.from_session(session)
        self._trial_id = trial_id
        self._run_id = run_id
        self._long_poll = long_poll
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="headway-preemption-watcher", daemon=True
        )
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start polling (idempotent)."""
        with self._lock:
            if not self._started and not self._stop.is_set():
                self._started = True
                self._thread.start()

    def close(self) -> None:
        """Stop polling without waiting for an open long-poll (the thread is a daemon)."""
        self._stop.set()
        if self._started and self._thread.is_alive():
            self._thread.join(timeout=0.1)

    def _run(self) -> None:
        _announce_listening()
        failures = 0
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                answer = self._api.trial_preempt_poll(
                    self._trial_id, run_id=self._run_id, timeout=self._long_poll
                )
            except (APIError, requests.RequestException, ValidationError) as exc:
                failures += 1
                log = logger.warning if failures in (1, 10) or failures % 300 == 0 else logger.debug
                log("preemption watcher: poll %d failed: %s", failures, exc)
            else:
                failures = 0
                if answer.should_preempt:
                    logger.info("preemption requested by the registry")
                    self.should_preempt = True
                    return
                if time.monotonic() - began >= self._long_poll / 2:
                    continue  # a full long-poll: ask again at once
            self._stop.wait(self._interval)


class PreemptContext:
    """Tells the training loop whether to checkpoint and exit now.

    Built by ``core.init()``. In local mode there is no watcher and ``should_preempt()`` is always
    False (it still performs the same collectives, so distributed code behaves the same).

    Arguments:
        distributed (DistributedContext): this process's ranks.
        watcher (PreemptionWatcher | None): the poller (None: never preempt).
        mode (PreemptMode): see ``PreemptMode``.
        session (Session | None), trial_id, run_id: for acknowledging (managed mode).
    """

    def __init__(
        self,
        *,
        distributed: DistributedContext,
        watcher: PreemptionWatcher | None,
        mode: PreemptMode = PreemptMode.WorkersAskChief,
        session: Session | None = None,
        trial_id: int | None = None,
        run_id: int | None = None,
    ) -> None:
        if not isinstance(mode, PreemptMode):
            raise ValueError(f"preempt_mode must be a PreemptMode, got {mode!r}")
        self._dist = distributed
        self._watcher = watcher
        self._mode = mode
        self._api = RegistryAPI.from_session(session) if session is not None else None
        self._trial_id = trial_id
        self._run_id = run_id
        self._acked = False
        self._started = False

    @property
    def mode(self) -> PreemptMode:
        """The ``PreemptMode`` in use."""
        return self._mode

    def start(self) -> None:
        """Start the watcher thread if this rank polls (called by ``Context.__enter__``)."""
        self._started = True
        if self._watcher is not None and self._polls_here():
            self._watcher.start()

    def close(self) -> None:
        """Stop the watcher thread."""
        if self._watcher is not None:
            self._watcher.close()

    def _polls_here(self) -> bool:
        return self._dist.rank == 0 or self._mode is PreemptMode.WorkersAskMaster

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """Return True when the trial should checkpoint and exit as soon as possible.

        Arguments:
            auto_ack (bool): acknowledge the signal the first time True is returned (chief only),
                telling the registry the trial will exit on its own. Pass False and call
                ``acknowledge_preemption_signal()`` yourself to acknowledge later.

        Raises:
            RuntimeError: on a non-chief rank in ``PreemptMode.ChiefOnly``.

        .. note::
            In ``WorkersAskChief`` mode this is a collective: every rank must call it at the same
            points. Otherwise it only reads a flag.
        """
        if self._mode is PreemptMode.ChiefOnly and self._dist.rank != 0:
            raise RuntimeError("should_preempt() is chief-only in PreemptMode.ChiefOnly")
        if not self._started:
            self.start()  # used without ``with core.init()``: start polling lazily
        value = self._watcher.should_preempt if self._watcher is not None else False
        if self._mode is PreemptMode.WorkersAskChief:
            value = bool(self._dist.broadcast(value))
        if value and auto_ack and self._dist.rank == 0 and not self._acked:
            self.acknowledge_preemption_signal()
        return value

    def acknowledge_preemption_signal(self) -> None:
        """Tell the registry this run saw the preemption signal and will exit.

        Only the chief acknowledges, once; on other ranks and on repeated calls this does nothing.

        Sends ``RegistryAPI.trial_preempt_ack`` for this run. A registry without that endpoint
        (404) or an unreachable one is logged, not raised: the trial exits either way.
        """
        if self._acked or self._dist.rank != 0:
            return
        self._acked = True
        if self._api is None or self._trial_id is None:
            logger.info("preemption acknowledged (local mode)")
            return
        try:
            self._api.trial_preempt_ack(self._trial_id, run_id=self._run_id)
        except NotFoundError as exc:
            logger.info("registry has no preemption ack endpoint (%s); continuing", exc)
        except (APIError, requests.RequestException, ValidationError) as exc:
            logger.warning("could not acknowledge preemption: %s", exc)
