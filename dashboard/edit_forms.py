"""Input of the dashboard's edit forms: experiment name / description / labels, notes of
experiments and trials, model description / labels, model version comment / labels.

The forms only read the POSTed text (labels as one comma-separated line); the limits and the
label rule are ``registry.user_text``'s, applied by the service each view calls
(``registry.lifecycle.experiment_patch``, ``trial_patch``, ``registry.model_registry``), whose
``InvalidInput`` errors ``EditForm.add_service_errors`` puts on the fields they name, so the
dashboard and the REST API refuse the same input with the same words.
"""

from __future__ import annotations

from typing import Any

from django import forms

from registry.errors import InvalidInput
from registry.user_text import parse_label_line

LABELS_HELP = "Comma-separated, e.g. baseline, mnist"


def _text(label: str, rows: int = 0, **kwargs: Any) -> forms.CharField:
    """A text field (a textarea of ``rows`` rows when > 0) kept as typed: limits are checked
    by the service, so a too-long value comes back with the service's message."""
    widget = forms.Textarea(attrs={"rows": rows}) if rows else forms.TextInput
    return forms.CharField(label=label, required=False, strip=False, widget=widget, **kwargs)


class EditForm(forms.Form):
    """Base of the edit forms: service errors onto fields, and the cleaned values to save."""

    def add_service_errors(self, exc: InvalidInput) -> None:
        """Show a service's ``{field: [why]}`` errors on those fields (others on the form)."""
        for field, messages in exc.errors.items():
            for message in messages:
                self.add_error(field if field in self.fields else None, message)

    def clean_labels(self) -> list[str]:
        """The labels line as a list (``registry.user_text.parse_label_line``)."""
        return parse_label_line(self.cleaned_data.get("labels") or "")

    def changes(self) -> dict[str, Any]:
        """The cleaned values by field name: the keyword arguments of the service."""
        return dict(self.cleaned_data)


class ExperimentEditForm(EditForm):
    """Name (required), description, labels of an experiment."""

    name = _text("Name")
    description = _text("Description", rows=3)
    labels = _text("Labels", help_text=LABELS_HELP)


class NotesForm(EditForm):
    """Markdown notes of an experiment or a trial."""

    notes = _text("Notes (Markdown)", rows=10)


class ModelEditForm(EditForm):
    """Description and labels of a registered model."""

    description = _text("Description", rows=3)
    labels = _text("Labels", help_text=LABELS_HELP)


class VersionEditForm(EditForm):
    """Comment and labels of a model version."""

    comment = _text("Comment", rows=2)
    labels = _text("Labels", help_text=LABELS_HELP)
