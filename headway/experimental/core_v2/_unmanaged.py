"""Starting an unmanaged run and keeping it alive: the registry calls of ``core_v2.init()``.

The chief (rank 0) asks the registry for the run (``RegistryAPI.unmanaged_start`` with the
user's token) and broadcasts the answer, so every rank reports as the same trial (Determined's
``_run_on_rank_0_and_broadcast``). The chief then heartbeats in a daemon thread until the
context closes, and ends the run with an exit code: 0 after ``close()``, 1 after an exception.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from headway._info import ClusterInfo, TrialInfo
from headway.client import APIError, RegistryAPI, UnauthenticatedError
from headway.core import DistributedContext

logger = logging.getLogger("headway.core_v2")


def start_run(
    api: RegistryAPI,
    distributed: DistributedContext,
    document: dict[str, Any],
    *,
    hparams: dict[str, Any] | None,
    external_experiment_id: str | None,
    external_trial_id: str | None,
) -> tuple[ClusterInfo, float]:
    """Start the run on the chief, share it with every rank; return its ``ClusterInfo`` (the
    run's token, ids, stored config, latest checkpoint) and the heartbeat interval in seconds.

    Raises:
        ValueError: the registry refused the config or ids (its message names the field), or
            no user token was found (``headway login`` / ``$HEADWAY_TOKEN``); on other ranks, a
            ``RuntimeError`` saying the chief failed.
    """
    answer: dict[str, Any] | None = None
    error: str | None = None
    if distributed.rank == 0:
        try:
            started = api.unmanaged_start(
                config=document,
                external_experiment_id=external_experiment_id,
                external_trial_id=external_trial_id,
                hparams=hparams,
            )
            answer = started.model_dump()
        except UnauthenticatedError as exc:
            error = (
                f"the master at {api.session.master_url} refused the token ({exc}): log in with "
                "`headway login` or set HEADWAY_TOKEN"
            )
        except APIError as exc:
            error = f"the master refused the unmanaged run: {exc}"
    if distributed.size > 1:
        answer, error = distributed.broadcast((answer, error))
    if error is not None:
        raise ValueError(error) if distributed.rank == 0 else RuntimeError(error)
    assert answer is not None
    info = ClusterInfo(
        master_url=api.session.master_url,
        token=answer["token"],
        trial=TrialInfo(
            trial_id=answer["trial_id"],
            experiment_id=answer["experiment_id"],
            run_id=answer["run_id"],
            hparams=answer["hparams"],
            trial_seed=answer["trial_seed"],
            config=answer["config"],
        ),
        latest_checkpoint=answer["latest_checkpoint"],
        latest_checkpoint_steps=answer["latest_checkpoint_steps"],
    )
    return info, float(answer["heartbeat_interval_s"])


class RunKeeper:
    """The chief's heartbeat thread for an unmanaged run, and the run's end.

    Arguments:
        info (ClusterInfo): the run (its token authenticates the calls).
        interval (float): seconds between heartbeats.
    """

    def __init__(self, info: ClusterInfo, interval: float) -> None:
        from headway.client import Session

        self._api = RegistryAPI.from_session(Session(info.master_url, info.token, max_retries=2))
        self._trial_id = info.trial.trial_id
        self._run_id = info.trial.run_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name="headway-unmanaged-heartbeat", daemon=True
        )
        self._ended = False

    def start(self) -> None:
        """Start heartbeating (idempotent)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._api.unmanaged_heartbeat(self._trial_id, self._run_id)
            except APIError as exc:
                # 409 (the run has ended: lost or superseded) or 401 (its token with it): no
                # later heartbeat can succeed.
                logger.error(
                    "trial %s run %s: heartbeat refused: %s", self._trial_id, self._run_id, exc
                )
                return
            except Exception as exc:  # the master is away: the next beat tries again
                logger.warning("trial %s: heartbeat failed: %s", self._trial_id, exc)

    def end(self, failed: bool) -> None:
        """Stop heartbeating and end the run: exit code 1 when ``failed`` (its trial ends
        ERROR), else 0 (COMPLETED). Once; errors are logged (the trial is then lost later)."""
        self._stop.set()
        if self._ended:
            return
        self._ended = True
        try:
            answer = self._api.unmanaged_exit(self._trial_id, self._run_id, exit_code=int(failed))
            logger.info("trial %s ended %s", self._trial_id, answer.trial_state)
        except Exception as exc:
            logger.error("trial %s: could not end run %s: %s", self._trial_id, self._run_id, exc)
