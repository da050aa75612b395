"""``get_cluster_info()``: what a trial process knows about itself when run by Headway."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from headway.expconf import ExperimentConfig

# ``headway.expconf`` (pydantic) is imported where a config is parsed, not here: ``import
# headway`` (every CLI command, the launchers) stays light.


@dataclasses.dataclass(frozen=True)
class TrialInfo:
    """The trial this process runs (Determined's ``ClusterInfo.trial``).

    Attributes:
        trial_id (int), experiment_id (int), run_id (int): ids; ``run_id`` grows by one on every
            resume or restart of the same trial.
        hparams (dict): this trial's sampled hyperparameters (nested dicts kept nested).
        trial_seed (int): seed for this trial's RNGs.
        config (ExperimentConfig): the experiment config, validated when this is built (a
            mapping given is parsed by ``headway.expconf.parse_received_config``: a bad field
            raises ``ValueError`` naming it). Read attributes: ``config.searcher.metric``.

    Determined's dict spellings stay: ``_config`` (the config as a mapping, as the master
    stored it) and ``user_data`` (its ``data`` section).
    """

    trial_id: int
    experiment_id: int
    run_id: int
    hparams: dict[str, Any]
    trial_seed: int
    config: ExperimentConfig

    def __post_init__(self) -> None:
        from headway.expconf import parse_received_config

        # Parsed once, here: the frozen dataclass keeps the model.
        object.__setattr__(self, "config", parse_received_config(self.config))

    @property
    def _config(self) -> dict[str, Any]:
        from headway.expconf import config_json

        # Determined exposes the config as the dict ``info.trial._config``; keep it working.
        return config_json(self.config)

    @property
    def user_data(self) -> dict[str, Any]:
        """The config's ``data`` section (Determined's ``ClusterInfo.trial.user_data``)."""
        return dict(self.config.data)


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """Everything the worker told this process, read from ``$HEADWAY_CLUSTER_INFO``.

    Attributes:
        master_url (str): registry base URL.
        token (str): trial-scoped API token.
        trial (TrialInfo): ids, hparams, seed, config.
        latest_checkpoint (str | None): storage_id to restore from (own latest checkpoint on
            resume/restart; the source checkpoint of a continued trial), None on a fresh start.
        latest_checkpoint_steps (int | None): ``steps_completed`` of that checkpoint.
        searcher_length (int | None): length of the trial's current searcher operation (in
            ``searcher.max_length``'s unit); None: ``searcher.max_length``.
        task_type (str): always ``"TRIAL"`` for now.
        slot_ids (list[int | str]): this host's slots of the run (``$HEADWAY_SLOT_IDS``, one
            process each under the launcher): CUDA device numbers on a GPU host, the slot
            number ``N`` of ``cpuN`` on a CPU host; a device named otherwise (a GPU UUID) is
            kept as its name. Empty when the worker named none.
        container_addrs (list[str]): one entry per host the run spans, the chief's address
            first (``$HEADWAY_CHIEF_IP``). Determined lists every host's address; a Headway
            trial only learns the chief's, so on a run over several hosts the other entries
            are ``""`` (``len()`` and ``[0]``, what custom launchers use, are exact).
        container_rank (int): this host's index among them (``$HEADWAY_NODE_RANK``; 0 is
            the chief).
    """

    master_url: str
    token: str
    trial: TrialInfo
    latest_checkpoint: str | None
    latest_checkpoint_steps: int | None = None
    searcher_length: int | None = None
    task_type: str = "TRIAL"
    slot_ids: list[int | str] = dataclasses.field(default_factory=list)
    container_addrs: list[str] = dataclasses.field(default_factory=lambda: ["127.0.0.1"])
    container_rank: int = 0

    @property
    def _trial_info(self) -> TrialInfo:
        # Determined's spelling (``info._trial_info.experiment_id``), used by its examples.
        return self.trial

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterInfo:
        """Build from the worker's JSON document (see docs/internals.md)."""
        from headway.expconf import parse_received_config

        trial = TrialInfo(
            trial_id=int(data["trial_id"]),
            experiment_id=int(data["experiment_id"]),
            run_id=int(data["run_id"]),
            hparams=dict(data.get("hparams") or {}),
            trial_seed=int(data.get("trial_seed") or 0),
            config=parse_received_config(data.get("experiment_config")),
        )
        return cls(
            master_url=str(data["master_url"]),
            token=str(data["token"]),
            trial=trial,
            latest_checkpoint=data.get("latest_checkpoint"),
            latest_checkpoint_steps=data.get("latest_checkpoint_steps"),
            searcher_length=data.get("searcher_length"),
            **_placement(),
        )


def _slot_id(name: str) -> int | str:
    text = name.strip()
    number = text[3:] if text.startswith("cpu") else text
    return int(number) if number.isdigit() else text


def _placement() -> dict[str, Any]:
    """``slot_ids``, ``container_addrs`` and ``container_rank`` from the variables the worker
    sets for ``headway.launch.torch_distributed`` (see ``ClusterInfo``)."""
    raw_slots = os.environ.get("HEADWAY_SLOT_IDS") or ""
    nodes = max(int(os.environ.get("HEADWAY_NUM_NODES") or 1), 1)
    chief = os.environ.get("HEADWAY_CHIEF_IP") or "127.0.0.1"
    return {
        "slot_ids": [_slot_id(s) for s in raw_slots.split(",") if s.strip()],
        "container_addrs": [chief] + [""] * (nodes - 1),
        "container_rank": int(os.environ.get("HEADWAY_NODE_RANK") or 0),
    }


def get_cluster_info() -> ClusterInfo | None:
    """Return this process's ``ClusterInfo``, or None when not launched by a Headway worker.

    Reads the JSON file named by ``$HEADWAY_CLUSTER_INFO``; raises ``RuntimeError`` naming the
    path when the variable is set but the file is missing or not valid JSON, or its
    ``experiment_config`` does not validate (naming each bad field).
    """
    path = os.environ.get("HEADWAY_CLUSTER_INFO")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"HEADWAY_CLUSTER_INFO={path!r} cannot be read: {exc}") from exc
    try:
        return ClusterInfo.from_dict(data)
    except ValueError as exc:
        raise RuntimeError(f"HEADWAY_CLUSTER_INFO={path!r}: {exc}") from None
