"""Experiment / trial states (Determined's names) and the states of one trial run."""

from django.db import models


class State(models.TextChoices):
    """State of an experiment or a trial."""

    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPING_COMPLETED = "STOPPING_COMPLETED"
    STOPPING_CANCELED = "STOPPING_CANCELED"
    STOPPING_KILLED = "STOPPING_KILLED"
    STOPPING_ERROR = "STOPPING_ERROR"
    COMPLETED = "COMPLETED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"
    # Experiments only: ``DELETE experiments/{id}/`` removes stored checkpoints, then the rows.
    DELETING = "DELETING"
    DELETED = "DELETED"
    DELETE_FAILED = "DELETE_FAILED"


TERMINAL_STATES = frozenset({State.COMPLETED, State.CANCELED, State.ERROR})

# An experiment being deleted or deleted: lists leave it out and it takes no edits
# (``Experiment.objects.not_deleted()``); DELETE_FAILED is not here, its owner has to act on it.
DELETED_STATES = frozenset({State.DELETING, State.DELETED})


class RunState(models.TextChoices):
    """State of one run (process launch) of a trial."""

    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    EXITED = "EXITED"


class StopReason(models.TextChoices):
    """Why a run's process must stop (``TrialRun.stop_requested``); ``NONE``: keep going.

    The SDK's ``should_preempt()`` sees any reason but ``NONE``; the worker enforces ``KILL``
    at once. ``PREEMPT`` (the host shuts down) and ``PAUSE`` resume the trial after the
    process's acknowledged exit 0; ``CLOSE`` (the searcher closed the trial) ends it COMPLETED.
    """

    NONE = "", "none"
    PAUSE = "pause"
    CANCEL = "cancel"
    KILL = "kill"
    PREEMPT = "preempt"
    CLOSE = "close"
