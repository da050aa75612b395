"""``Config`` (and its deprecated aliases ``DefaultConfig`` / ``UnmanagedConfig``): what an
unmanaged run tells the registry about its experiment and trial; ignored in a managed trial.

Determined 0.38's ``core_v2.Config`` fields, same names and meanings. ``workspace`` /
``project`` (both or neither) name the project the experiment is made in; the registry refuses
an unknown or archived one with a 400 naming the field.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any


@dataclasses.dataclass
class Config:
    """An unmanaged run's experiment config and external ids (ignored in a managed trial).

    Attributes:
        name (str | None): experiment name (default ``unmanaged-<8 hex digits>``).
        hparams (dict | None): this trial's hyperparameters (shown like any trial's).
        data (dict | None), description (str | None), labels (list[str] | None): as in an
            experiment config.
        workspace (str | None), project (str | None): the project the experiment is made in
            (both or neither; neither: the default project ``Uncategorized``).
        checkpoint_storage (str | dict | None): where checkpoints go: the name of one of the
            admin's storage locations (``"team-a"`` is ``{"location": "team-a"}``) or a
            ``checkpoint_storage`` mapping the registry resolves as for any experiment; unset:
            the admin's default location. Never a path of the script's own choosing.
        searcher (dict | None): ``{"name": "single", "metric": ..., "smaller_is_better": ...}``
            (the metric that ranks checkpoints and trials; default metric ``"unmanaged"``).
        external_experiment_id (str | None): groups runs into one experiment: every run with
            the same id (per user) joins the same experiment.
        external_trial_id (str | None): with ``external_experiment_id``: every run with the
            same id continues the same trial (resume: reports go on, ``info.latest_checkpoint``
            is its latest checkpoint).
        checkpoint_upload (str): ``"direct"`` (default): the script writes and reads the
            storage location itself (a mounted shared_fs folder, S3 with its own credentials);
            ``"master"``: checkpoint files travel through the master, which writes them into
            the location (for a machine that cannot reach the storage; each file at most the
            server's ``HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES``). A Headway addition.
        ship_logs (bool): send the lines the script writes to ``sys.stdout`` / ``sys.stderr``
            as the trial's logs while the run is open (default True; they are still printed).
            A Headway addition: Determined always ships them.
    """

    name: str | None = None
    hparams: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    description: str | None = None
    labels: list[str] | None = None
    workspace: str | None = None
    project: str | None = None
    checkpoint_storage: str | dict[str, Any] | None = None
    searcher: dict[str, Any] | None = None
    external_experiment_id: str | None = None
    external_trial_id: str | None = None
    checkpoint_upload: str = "direct"
    ship_logs: bool = True


@dataclasses.dataclass
class DefaultConfig(Config):
    """Deprecated (as in Determined): use ``Config``."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("'DefaultConfig' is deprecated; use 'Config'", FutureWarning, stacklevel=2)
        super().__init__(**kwargs)


@dataclasses.dataclass
class UnmanagedConfig(Config):
    """Deprecated (as in Determined): use ``Config``."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("'UnmanagedConfig' is deprecated; use 'Config'", FutureWarning, stacklevel=2)
        super().__init__(**kwargs)


CHECKPOINT_UPLOADS = ("direct", "master")


def check_checkpoint_upload(config: Config) -> None:
    """Raise ``ValueError`` naming ``checkpoint_upload`` when it is not one of
    ``CHECKPOINT_UPLOADS``."""
    if config.checkpoint_upload not in CHECKPOINT_UPLOADS:
        raise ValueError(
            f"Config.checkpoint_upload must be one of {', '.join(CHECKPOINT_UPLOADS)}, "
            f"got {config.checkpoint_upload!r}"
        )


def merge_config(
    config: Config | None, defaults: Config | None, unmanaged: Config | None
) -> Config:
    """The ``Config`` ``init()`` uses: ``config``, else ``defaults`` completed by
    ``unmanaged``'s workspace, project and external ids (Determined's ``_merge_config``).

    Raises:
        ValueError: none of them given.
    """
    if defaults is not None or unmanaged is not None:
        warnings.warn(
            "'defaults' and 'unmanaged' are deprecated; pass 'config'", FutureWarning, stacklevel=3
        )
    if config is not None:
        return config
    if defaults is None:
        if unmanaged is not None:
            return unmanaged
        raise ValueError("core_v2.init() outside a managed trial needs config=core_v2.Config(...)")
    if unmanaged is not None:
        for field in ("workspace", "project", "external_experiment_id", "external_trial_id"):
            if getattr(defaults, field) is None:
                setattr(defaults, field, getattr(unmanaged, field))
    return defaults


def config_document(
    config: Config, checkpoint_storage: str | dict[str, Any] | None
) -> dict[str, Any]:
    """The experiment config sent to the registry (fields left unset are left out).

    ``checkpoint_storage`` (``init()``'s argument) wins over ``config.checkpoint_storage``; a
    string names a storage location.
    """
    import uuid

    storage = checkpoint_storage or config.checkpoint_storage
    document: dict[str, Any] = {
        "name": config.name or f"unmanaged-{uuid.uuid4().hex[:8]}",
        "description": config.description,
        "labels": config.labels,
        "data": config.data,
        "searcher": config.searcher,
        "workspace": config.workspace,
        "project": config.project,
        "checkpoint_storage": {"location": storage} if isinstance(storage, str) else storage,
    }
    return {key: value for key, value in document.items() if value is not None}
