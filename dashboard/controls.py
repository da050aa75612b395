"""The dashboard's controls: each button's action name -> the ``registry.lifecycle`` function it
calls (``registry.lifecycle`` alone decides whether the transition is legal).

The views that use these tables are on the pages the buttons are on
(``dashboard.views.experiment.experiment_control``, ``dashboard.views.trial.trial_control``,
``dashboard.views.experiments.experiment_bulk_control``); which buttons a page shows is
``dashboard.selectors.experiment_actions`` / ``trial_actions``.
"""

from __future__ import annotations

from collections.abc import Callable

from registry import lifecycle
from registry.models import Experiment, Trial

EXPERIMENT_CONTROLS: dict[str, Callable[..., Experiment]] = {
    "pause": lifecycle.experiment_pause,
    "activate": lifecycle.experiment_activate,
    "cancel": lifecycle.experiment_cancel,
    "kill": lifecycle.experiment_kill,
    "archive": lifecycle.experiment_archive,
    "unarchive": lifecycle.experiment_unarchive,
}
TRIAL_CONTROLS: dict[str, Callable[..., Trial]] = {
    "pause": lifecycle.trial_pause,
    "activate": lifecycle.trial_activate,
    "cancel": lifecycle.trial_cancel,
    "kill": lifecycle.trial_kill,
}
# The bulk controls of the experiment list (a subset of EXPERIMENT_CONTROLS), action -> past
# participle for the notes; order is button order on the list page. Kill (no checkpoint) and
# unarchive stay per experiment, on its page, where the confirmation can name what is lost.
BULK_ACTIONS: dict[str, str] = {
    "pause": "paused",
    "activate": "activated",
    "cancel": "canceled",
    "archive": "archived",
}
