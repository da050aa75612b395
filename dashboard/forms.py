"""Input of the dashboard's forms (Django ``forms``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.http import HttpRequest

from headway.expconf import OverrideError, parse_hparam_overrides


class ContinueTrialForm(forms.Form):
    """The "Continue trial" form: checkpoint, optional new max_length, hparam overrides.

    ``hparams`` is text with one ``NAME=VALUE`` per line, read exactly as ``headway trial
    continue --hparam`` reads it (YAML values, dotted names for nested groups); its cleaned value
    is the nested overrides dict.
    """

    checkpoint = forms.UUIDField(required=False)
    max_length = forms.IntegerField(required=False, min_value=1, label="max_length (batches)")
    hparams = forms.CharField(required=False, widget=forms.Textarea, strip=False)

    def clean_hparams(self) -> dict[str, Any]:
        """Parse the overrides; a bad line becomes a field error naming it."""
        try:
            return parse_hparam_overrides(self.cleaned_data.get("hparams", "").splitlines())
        except OverrideError as exc:
            raise forms.ValidationError(str(exc)) from None

    def error_text(self) -> str:
        """Every field error on one line, e.g. ``max_length (batches): Ensure this value ...``."""
        parts: list[str] = []
        for name, errors in self.errors.items():
            label = (self.fields[name].label or name) if name in self.fields else name
            parts.extend(f"{label}: {error}" for error in errors)
        return "; ".join(parts)


# Session key of a rejected "Continue trial" form: what was typed and why it was refused.
CONTINUE_FORM_SESSION_KEY = "dashboard.continue_form"
CONTINUE_FORM_TTL_SECONDS = 120
_CONTINUE_FIELDS = ("checkpoint", "max_length", "hparams")


def stash_continue_form(
    request: HttpRequest, trial_id: int, errors: Mapping[str, Sequence[Any]]
) -> None:
    """Keep a rejected continue form (typed values, errors by field) for the page redirected to.

    Post/redirect/get loses the bound form; the session carries it one page further, the way
    ``messages`` carries the note. ``errors`` maps a field name (or ``__all__``) to messages;
    a key that is not a form field (``__all__``, a lifecycle error path) is kept under ``form``
    (templates cannot read names that start with ``_``).
    """
    by_field: dict[str, list[str]] = {}
    for name, messages in errors.items():
        key = name if name in _CONTINUE_FIELDS else "form"
        by_field.setdefault(key, []).extend(str(m) for m in messages)
    request.session[CONTINUE_FORM_SESSION_KEY] = {
        "trial": trial_id,
        "at": time.time(),
        "data": {name: request.POST.get(name, "") for name in _CONTINUE_FIELDS},
        "errors": by_field,
    }


def pop_continue_form(request: HttpRequest | None, trial_id: int) -> dict[str, Any] | None:
    """The stashed form of ``trial_id`` (``{"data": ..., "errors": ...}``), removed; else None.

    A form stashed for another trial stays (the page may show several trials' forms). One older
    than ``CONTINUE_FORM_TTL_SECONDS`` is dropped: it belongs to the redirect that just happened,
    not to a later visit (e.g. when the page it went back to did not show the form).
    """
    session = getattr(request, "session", None)
    if session is None:
        return None
    stashed = session.get(CONTINUE_FORM_SESSION_KEY)
    if not isinstance(stashed, dict) or stashed.get("trial") != trial_id:
        return None
    del session[CONTINUE_FORM_SESSION_KEY]
    if time.time() - float(stashed.get("at", 0)) > CONTINUE_FORM_TTL_SECONDS:
        return None
    return stashed
