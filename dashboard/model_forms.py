"""Input of the model registry's dashboard forms: create a model, register a checkpoint as a
version (Django ``forms``; names checked with the registry's own rule)."""

from __future__ import annotations

from django import forms

from registry import model_registry as svc
from registry.errors import InvalidInput


class ModelNameField(forms.CharField):
    """A model name, checked with the registry's own rule (``validate_model_name``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=svc.MODEL_NAME_MAX, strip=True, **kwargs)

    def validate(self, value: str) -> None:
        super().validate(value)
        try:
            svc.validate_model_name(value)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.errors["name"][0]) from None


class _Form(forms.Form):
    def error_text(self) -> str:
        """Every field error on one line: ``model: Use letters, ...``."""
        return "; ".join(
            f"{name}: {error}" for name, errors in self.errors.items() for error in errors
        )


class CreateModelForm(_Form):
    """``name``, ``description`` and ``workspace`` (an id; empty: the default workspace)."""

    name = ModelNameField()
    workspace = forms.IntegerField(required=False, min_value=1)
    description = forms.CharField(required=False, widget=forms.Textarea)


class RegisterVersionForm(_Form):
    """``checkpoint`` (uuid) to register into ``model``: an existing model the user may change,
    or a new name (then created, owned by the user)."""

    checkpoint = forms.UUIDField()
    model = ModelNameField()
