"""Wire models of the unmanaged-run routes (``headway.experimental.core_v2``): what the
registry answers when a script starts, heartbeats or ends a run it made itself."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from headway.client._wire import WireModel


class UnmanagedStarted(WireModel):
    """``POST unmanaged/``: the experiment, trial and new run a script reports as.

    Attributes:
        experiment_id (int), trial_id (int), run_id (int): ids; ``run_id`` grows by one on
            every start of the same trial.
        token (str): the run's trial-scoped token (it reaches only this trial's SDK routes and
            stops working once the run has ended).
        resumed (bool): the trial existed (same ``external_trial_id``): this run continues it.
        hparams (dict): the trial's hyperparameters.
        trial_seed (int): seed for the trial's RNGs.
        config (dict): the experiment's stored config (checkpoint storage resolved).
        latest_checkpoint (str | None): uuid of the trial's latest checkpoint (resume from it).
        latest_checkpoint_steps (int | None): its ``steps_completed``.
        heartbeat_interval_s (float): how often the run must heartbeat (a quarter of the
            registry's timeout, after which the run is lost and its trial ends ERROR).
    """

    experiment_id: int
    trial_id: int
    run_id: int
    token: str
    resumed: bool
    hparams: dict[str, Any] = Field(default_factory=dict)
    trial_seed: int = 0
    config: dict[str, Any] = Field(default_factory=dict)
    latest_checkpoint: str | None = None
    latest_checkpoint_steps: int | None = None
    heartbeat_interval_s: float


class UnmanagedHeartbeat(WireModel):
    """``POST unmanaged/trials/{id}/runs/{run}/heartbeat/``: the run is still live.

    Attributes:
        stop_requested (str): why the run should stop ("" to keep going), e.g. ``kill`` from
            the dashboard; ``should_preempt()`` reports it too.
    """

    stop_requested: str = ""


class UnmanagedExited(WireModel):
    """``POST unmanaged/trials/{id}/runs/{run}/exit/``: the trial's state after the run ended.

    Attributes:
        trial_state (str): e.g. COMPLETED or ERROR (unchanged when the run had ended already).
    """

    trial_state: str
