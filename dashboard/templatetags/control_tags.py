"""Template helpers of the control forms: where to come back to, confirmations, a kept form.

The confirmations say what will really happen: a kill stops the process at once and
saves nothing new, so what survives is the latest checkpoint already saved, if any; a cancel
stops gracefully, saving a checkpoint first (``registry.lifecycle`` trial_cancel / trial_kill,
Determined's "cancel" vs "kill").
"""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from dashboard.forms import pop_continue_form

register = template.Library()

TABLE_CONTINUE_CHOICES = 10
"""Checkpoints offered by each trial's "Continue trial" form in the experiment page's table."""


@register.simple_tag(takes_context=True)
def control_next(context: template.Context, trial: Any = None) -> str:
    """The path a control form posted from this page should come back to (its ``next`` field).

    On the trial page: that page. Elsewhere (the experiment page, or its live fragments rendered
    by ``experiment-live``): the experiment page, at the trial's row when ``trial`` is given.
    """
    request = context.get("request")
    if request is not None and _on_trial_page(context):
        return str(request.path)
    experiment = context.get("experiment")
    if experiment is None:
        return str(request.path) if request is not None else ""
    path = reverse("dashboard:experiment", args=[experiment.id])
    return f"{path}#trial-{trial.id}" if trial is not None else path


def _latest_step(trial: Any) -> int | None:
    # checkpoint_list is attached by the page's selectors (completed checkpoints, no query).
    for checkpoint in getattr(trial, "checkpoint_list", None) or ():
        if checkpoint.uuid == trial.latest_checkpoint:
            return int(checkpoint.steps_completed)
    return None


@register.filter
def kill_confirmation(trial: Any) -> str:
    """The Kill dialog's text for one trial, naming its latest checkpoint's step if it has one."""
    head = f"Kill trial {trial.id}? Its process stops at once, without saving a new checkpoint."
    if trial.latest_checkpoint is None:
        return f"{head} It has no checkpoint yet: training it again restarts from scratch."
    step = _latest_step(trial)
    where = f" at step {step}" if step is not None else ""
    return f"{head} It can be continued later from its latest checkpoint{where}."


@register.filter
def cancel_confirmation(trial: Any) -> str:
    """The Cancel dialog's text for one trial."""
    return (
        f"Cancel trial {trial.id}? It stops gracefully: a running trial saves a checkpoint "
        "first. It will not resume, but it can be continued from its latest checkpoint."
    )


@register.filter
def experiment_confirmation(experiment: Any, action: str) -> str:
    """The dialog's text for a destructive experiment control (kill, cancel); else ``""``."""
    if action == "kill":
        return (
            f"Kill experiment {experiment.id}? Every trial stops at once, without saving a new "
            "checkpoint. A trial can be continued later from its latest checkpoint if it has "
            "one; one without a checkpoint restarts from scratch."
        )
    if action == "cancel":
        return (
            f"Cancel experiment {experiment.id}? Every trial stops gracefully, saving a "
            "checkpoint first, and the experiment ends CANCELED (it cannot be activated again)."
        )
    return ""


@register.simple_tag(takes_context=True)
def continue_form(context: template.Context, trial: Any) -> dict[str, Any]:
    """What the "Continue trial" form shows: values, errors by field, whether it is open, choices.

    A form rejected on the previous request (``dashboard.forms.stash_continue_form``) comes back
    open with what was typed and its errors; otherwise the latest checkpoint is selected.
    ``choices`` are the checkpoints the select offers: all of them on the trial page, the newest
    ``TABLE_CONTINUE_CHOICES`` (plus the selected one) in the experiment page's table, so that
    page's size does not grow with trials x checkpoints; ``more`` counts the ones left out.
    """
    stashed = pop_continue_form(context.get("request"), trial.id)
    if stashed is None:
        latest = trial.latest_checkpoint
        form = {
            "open": False,
            "checkpoint": str(latest) if latest else "",
            "max_length": "",
            "hparams": "",
            "errors": {},
        }
    else:
        data = stashed.get("data", {})
        form = {
            "open": True,
            "checkpoint": data.get("checkpoint") or str(trial.latest_checkpoint or ""),
            "max_length": data.get("max_length", ""),
            "hparams": data.get("hparams", ""),
            "errors": stashed.get("errors", {}),
        }
    checkpoints = list(getattr(trial, "checkpoint_list", None) or ())
    choices = checkpoints
    if not _on_trial_page(context) and len(checkpoints) > TABLE_CONTINUE_CHOICES:
        choices = checkpoints[:TABLE_CONTINUE_CHOICES]
        selected = [
            c for c in checkpoints[TABLE_CONTINUE_CHOICES:] if str(c.uuid) == form["checkpoint"]
        ]
        choices += selected
    form["choices"] = choices
    form["more"] = len(checkpoints) - len(choices)
    return form


def _on_trial_page(context: template.Context) -> bool:
    match = getattr(context.get("request"), "resolver_match", None)
    return match is not None and match.url_name == "trial"
