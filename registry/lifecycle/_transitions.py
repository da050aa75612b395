"""The one table of which control is legal in which state, for experiments and trials.

The lifecycle functions check it before acting; the dashboard and the API read it to offer only
legal controls. A control is *legal* in a state where it acts, a *no-op* where it is accepted and
changes nothing (pausing a PAUSED trial: double clicks and retries are safe), and illegal
(``IllegalTransition``, HTTP 409) everywhere else. Semantics follow Determined
(docs/lifecycle.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from registry.errors import IllegalTransition
from registry.models import State

_ENDED = frozenset({State.COMPLETED, State.CANCELED, State.ERROR})
_RUNNING = frozenset({State.ACTIVE, State.PAUSED})


@dataclass(frozen=True)
class Control:
    """Where one control acts and where it is a no-op.

    Attributes:
        legal (frozenset[State]): states in which the control changes something.
        no_op (frozenset[State]): states in which it is accepted and changes nothing.
    """

    legal: frozenset[State]
    no_op: frozenset[State] = frozenset()


# Order is button order on the dashboard.
TRIAL_CONTROLS: dict[str, Control] = {
    "pause": Control(frozenset({State.ACTIVE}), frozenset({State.PAUSED})),
    "activate": Control(frozenset({State.PAUSED}), frozenset({State.ACTIVE})),
    "cancel": Control(
        _RUNNING | {State.STOPPING_COMPLETED, State.STOPPING_ERROR},
        frozenset({State.CANCELED, State.STOPPING_CANCELED}),
    ),
    "kill": Control(
        _RUNNING | {State.STOPPING_COMPLETED, State.STOPPING_ERROR, State.STOPPING_CANCELED},
        frozenset({State.CANCELED, State.STOPPING_KILLED}),
    ),
    # A new trial warm-started from a checkpoint: the source must not be running.
    "continue": Control(_ENDED | {State.PAUSED}),
}

EXPERIMENT_CONTROLS: dict[str, Control] = {
    "pause": Control(frozenset({State.ACTIVE}), frozenset({State.PAUSED})),
    "activate": Control(frozenset({State.PAUSED}), frozenset({State.ACTIVE})),
    "cancel": Control(
        _RUNNING | {State.STOPPING_COMPLETED},
        frozenset({State.CANCELED, State.STOPPING_CANCELED}),
    ),
    "kill": Control(
        _RUNNING | {State.STOPPING_COMPLETED, State.STOPPING_CANCELED, State.STOPPING_ERROR},
        frozenset({State.CANCELED, State.STOPPING_KILLED}),
    ),
    # Archiving is a flag beside the state: only ended experiments may be archived.
    "archive": Control(_ENDED),
}

_PAST = {
    "pause": "paused",
    "activate": "activated",
    "cancel": "canceled",
    "kill": "killed",
    "continue": "continued",
    "archive": "archived",
}


def check_control(table: dict[str, Control], control: str, what: str, state: str) -> bool:
    """Whether ``control`` must act on an object in ``state``.

    Arguments:
        table: ``TRIAL_CONTROLS`` or ``EXPERIMENT_CONTROLS``.
        control: a key of ``table``.
        what: the object for the message, e.g. ``"trial 7"``.
        state: its current state.

    Returns:
        True when the control is legal (act), False when it is a no-op.

    Raises:
        IllegalTransition: (409) naming the current state and the states it is legal in.
    """
    rule = table[control]
    if state in rule.legal:
        return True
    if state in rule.no_op:
        return False
    allowed = ", ".join(s.value for s in State if s in rule.legal)
    raise IllegalTransition(f"{what} is {state}; it can be {_PAST[control]} only when {allowed}")


def legal_controls(table: dict[str, Control], state: str) -> list[str]:
    """The controls that act in ``state``, in table (button) order."""
    return [name for name, rule in table.items() if state in rule.legal]
