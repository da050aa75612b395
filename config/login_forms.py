"""The dashboard's and the admin's login forms, with the username bounded by its column.

Django's ``AuthenticationForm`` shows the username's ``max_length`` but does not validate it,
so a longer name reached ``authenticate()``; django-axes then recorded the failed attempt with
the name in a 255-character column, and PostgreSQL refused the insert (an anonymous 500). Here
a name longer than the user model's column is a form error naming ``username`` before any
backend (or the lockout bookkeeping) sees it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


def username_max_length() -> int:
    """Characters the user model's username column holds (150 for Django's ``User``)."""
    user_model = get_user_model()
    field = user_model._meta.get_field(user_model.USERNAME_FIELD)
    return getattr(field, "max_length", None) or 150


class _BoundedUsername:
    fields: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].validators.append(MaxLengthValidator(username_max_length()))


class LoginForm(_BoundedUsername, AuthenticationForm):
    """``/accounts/login/``: a username over its column's length is an error naming it."""


class AdminLoginForm(_BoundedUsername, AdminAuthenticationForm):
    """``/admin/login/``: as ``LoginForm``, with the admin's staff check."""
