"""``init`` / ``init_context`` / ``close``: the Core API for a script run anywhere.

Determined 0.38's ``core_v2`` semantics: inside a managed trial (``HEADWAY_CLUSTER_INFO`` set
by the worker) the config is ignored and the trial's own Core API context is returned.
Elsewhere the script becomes an unmanaged run: the registry at ``HEADWAY_MASTER`` (or the
``client`` given) creates or finds its experiment and trial with the user's token (the CLI's:
``HEADWAY_TOKEN`` or ``headway login``), and the run reports through the same REST routes as
any trial, with its own run token; the chief also ships what the script prints as the trial's
logs (``Config.ship_logs``, ``_log_shipper``). ``close()`` ends it COMPLETED; an exception that escapes
the script (``sys.excepthook``) or the ``with init_context(...)`` block ends it ERROR.
"""

from __future__ import annotations

import atexit
import sys
import types
from typing import Any

from headway._info import get_cluster_info
from headway.client import RegistryAPI
from headway.core import Context, DistributedContext, PreemptMode, TensorboardMode
from headway.core._distributed import default_distributed
from headway.core._init import init_for
from headway.experimental.core_v2._config import (
    Config,
    check_checkpoint_upload,
    config_document,
    merge_config,
)
from headway.experimental.core_v2._log_shipper import start_log_shipper
from headway.experimental.core_v2._unmanaged import RunKeeper, start_run

_state: dict[str, Any] = {"context": None, "master": None, "hooked": False, "failed": False}


def _user_api(client: RegistryAPI | None) -> RegistryAPI:
    if client is not None:
        return client
    from headway.experimental import client as experimental_client

    return experimental_client._get_api()  # HEADWAY_MASTER and the CLI's token


def init_context(
    *,
    config: Config | None = None,
    defaults: Config | None = None,
    unmanaged: Config | None = None,
    client: RegistryAPI | None = None,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """The Core API ``Context`` for this script, to use as ``with init_context(...) as ctx``.

    Arguments:
        config (Config): the unmanaged run's experiment config and external ids (ignored in a
            managed trial); ``defaults`` / ``unmanaged``: deprecated spellings of it.
        client (RegistryAPI | None): the registry and user token (default: ``$HEADWAY_MASTER``
            or ``http://127.0.0.1:8000`` with ``$HEADWAY_TOKEN`` or the ``headway login``
            token, as ``headway.experimental.client.login()`` picks them).
        distributed, preempt_mode, tensorboard_mode: as ``headway.core.init()``'s.
        checkpoint_storage (str | dict | None): unmanaged: a storage location's name (or a
            ``checkpoint_storage`` mapping) the registry resolves; managed: as
            ``core.init()``'s.

    Raises:
        ValueError: no config outside a managed trial, a config or id the registry refused
            (naming the field), no valid user token.
    """
    info = get_cluster_info()
    if info is not None:  # a managed trial: the worker's context, the config ignored
        return init_for(
            info,
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
            preempt_mode=preempt_mode,
            tensorboard_mode=tensorboard_mode,
        )
    merged = merge_config(config, defaults, unmanaged)
    check_checkpoint_upload(merged)
    api = _user_api(client)
    distributed = default_distributed(distributed, None)
    run, interval = start_run(
        api,
        distributed,
        config_document(merged, checkpoint_storage),
        hparams=merged.hparams,
        external_experiment_id=merged.external_experiment_id,
        external_trial_id=merged.external_trial_id,
    )
    context = init_for(
        run, distributed=distributed, preempt_mode=preempt_mode, tensorboard_mode=tensorboard_mode
    )
    if merged.checkpoint_upload == "master":
        from headway.storage._master import MasterStorageManager

        # Instead of the location's own backend: every file goes through the master.
        context.checkpoint._storage = MasterStorageManager(
            run.master_url, run.token, run.trial.trial_id, run.trial.run_id
        )
    if distributed.rank == 0:
        if merged.ship_logs:  # delivered before the run ends: the hooks run in order
            shipper = start_log_shipper(
                run.master_url, run.token, run.trial.trial_id, run.trial.run_id
            )
            context._close_hooks.append(shipper.close)
        keeper = RunKeeper(run, interval)
        keeper.start()
        context._close_hooks.append(keeper.end)
    _state["master"] = api.session.master_url
    return context


def init(
    *,
    config: Config | None = None,
    defaults: Config | None = None,
    unmanaged: Config | None = None,
    client: RegistryAPI | None = None,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> None:
    """The singleton style: start the context and set ``core_v2.train``, ``.checkpoint``,
    ``.preempt``, ``.distributed``, ``.searcher`` and ``.info``. A context already open is
    closed first. ``close()`` runs at exit if the script did not call it; an uncaught
    exception before then ends the run ERROR. Arguments and errors as ``init_context``'s."""
    close()
    context = init_context(
        config=config,
        defaults=defaults,
        unmanaged=unmanaged,
        client=client,
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=preempt_mode,
        tensorboard_mode=tensorboard_mode,
    )
    context.start()
    _state["context"] = context
    _state["failed"] = False
    _set_globals(context)
    if not _state["hooked"]:
        _state["hooked"] = True
        atexit.register(close)
        previous = sys.excepthook

        def excepthook(
            kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
        ) -> None:
            # Uncaught: the interpreter exits next, and close() at exit ends the run ERROR.
            _state["failed"] = True
            previous(kind, value, tb)

        sys.excepthook = excepthook


def close() -> None:
    """Deliver queued reports, stop the background threads and end the unmanaged run
    (COMPLETED; ERROR after an uncaught exception). Does nothing without an open context."""
    context = _state["context"]
    _state["context"] = None
    if context is None:
        return
    context._failed = context._failed or bool(_state["failed"])
    try:
        context.close()
    finally:
        _set_globals(None)


def url_reverse_webui_exp_view() -> str:
    """The dashboard page of the current run's experiment.

    Raises:
        RuntimeError: no run started by ``init()``.
    """
    from headway.experimental import core_v2

    info = core_v2.info
    if info is None:
        raise RuntimeError("call core_v2.init() first")
    master = _state["master"] or info.master_url
    return f"{master}/experiments/{info.trial.experiment_id}/"


def _set_globals(context: Context | None) -> None:
    from headway.experimental import core_v2

    core_v2.train = context.train if context else None
    core_v2.checkpoint = context.checkpoint if context else None
    core_v2.preempt = context.preempt if context else None
    core_v2.distributed = context.distributed if context else None
    core_v2.searcher = context.searcher if context else None
    core_v2.info = context.info if context else None
