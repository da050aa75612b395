"""The run a ``HeadwayLogger()`` given no Core API context starts itself (core_v2)."""

from __future__ import annotations

import dataclasses
from typing import Any

from headway.client import RegistryAPI
from headway.core import Context, DistributedContext
from headway.experimental import core_v2


def start_run(
    config: core_v2.Config | None, client: RegistryAPI | None, hparams: dict[str, Any]
) -> Context:
    """Start (and return, started) the Core API context of a run of this process: an unmanaged
    run by ``core_v2.init_context`` outside the cluster, the trial's own inside a managed one.

    ``hparams`` (what Lightning logged) become the trial's hparams when ``config`` gives none.
    The context is a single worker's: only rank zero calls this, and a run started by one rank
    must not wait for the others' collectives.

    Raises:
        ValueError: as ``core_v2.init_context`` (no token, a config the registry refused).
    """
    config = dataclasses.replace(config) if config is not None else core_v2.Config()
    if config.hparams is None and hparams:
        config.hparams = dict(hparams)
    context = core_v2.init_context(
        config=config, client=client, distributed=DistributedContext.single()
    )
    context.start()
    return context
