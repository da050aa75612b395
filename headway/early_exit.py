"""Leaving a hyperparameter search early: ``InvalidHP`` and the reasons a searcher hears.

Determined's ``det.InvalidHP``: a trial that finds its hyperparameters unusable (e.g. a batch
size that does not fit in memory) raises it, or calls
``core_context.searcher.report_early_exit(EarlyExitReason.INVALID_HP)``; searchers that sample
hyperparameters (``random``, ``adaptive_asha``) replace the trial with a new one.
"""

from __future__ import annotations

import enum


class EarlyExitReason(enum.StrEnum):
    """Why a trial left its search before the searcher was done with it (the wire value).

    - ``ERRORED``: it failed, or exited 0 without completing its searcher operation.
    - ``USER_CANCELED``: a user killed or canceled it.
    - ``INVALID_HP``: it reported its hyperparameters invalid.
    """

    ERRORED = "errored"
    USER_CANCELED = "user_canceled"
    INVALID_HP = "invalid_hp"


class InvalidHP(Exception):
    """Raise from a trial (``PyTorchTrial`` methods, or inside ``with core.init()``) when its
    hyperparameters cannot work. The trial is reported as exited early with
    ``EarlyExitReason.INVALID_HP`` and ends COMPLETED; the searcher may replace it.
    """
