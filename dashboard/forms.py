"""Input of the dashboard's forms (Django ``forms``, as STYLE.md §1 suggests)."""

from __future__ import annotations

from typing import Any

from django import forms

from headway.cli import OverrideError, parse_hparam_overrides


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
