"""The Headway user a provider's claims stand for: found by its identity, or created; its
groups and admin flag kept in step with the provider's at every sign-in."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from accounts.models import ExternalIdentity
from config.sso import OIDCSettings

# Django's ``Group.name`` column.
GROUP_NAME_MAX = 150


class SignInRefused(Exception):
    """The provider vouched for the user, but Headway refuses the sign-in; the message says
    why, for the login page (e.g. a local account of that name exists and is not linked)."""


def _username(oidc: OIDCSettings, claims: dict[str, Any]) -> str:
    value = claims.get(oidc.username_claim)
    if not isinstance(value, str) or not value.strip():
        raise SignInRefused(
            f"the provider's answer has no {oidc.username_claim!r} claim to name a new user "
            "(HEADWAY_OIDC_USERNAME_CLAIM)"
        )
    username = value.strip()
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise SignInRefused(
            f"{username!r} (claim {oidc.username_claim!r}) is not a valid username: letters, "
            "digits and @/./+/-/_ only"
        ) from None
    if len(username) > 150:
        raise SignInRefused(f"the username from claim {oidc.username_claim!r} is over 150 chars")
    return username


def groups_of(oidc: OIDCSettings, claims: dict[str, Any]) -> list[str]:
    """The group names of ``claims[groups_claim]``: a list of strings (a single string is one
    group, as some providers send it); an absent claim is no groups.

    Raises:
        SignInRefused: the claim is neither, or a name is empty or over 150 characters.
    """
    raw = claims.get(oidc.groups_claim)
    if raw is None:
        return []
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SignInRefused(f"the provider's {oidc.groups_claim!r} claim is not a list of names")
    cleaned = sorted({n.strip() for n in names})
    if any(not n or len(n) > GROUP_NAME_MAX for n in cleaned):
        raise SignInRefused(
            f"a group in the {oidc.groups_claim!r} claim is empty or over {GROUP_NAME_MAX} chars"
        )
    return cleaned


def signed_in_user(oidc: OIDCSettings, claims: dict[str, Any]) -> Any:
    """The active user for the provider account ``claims`` describe (``sub`` required),
    created on its first sign-in with an unusable password; its e-mail, groups (exactly the
    provider's: ``groups_of``) and, where ``admin_groups`` is set, ``is_staff`` follow the
    provider's claims.

    Raises:
        SignInRefused: no ``sub``; a deactivated user; a malformed username or groups claim;
            or a first sign-in whose username a local account holds (an admin links the two
            by adding an external identity in the admin site).
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SignInRefused("the provider's answer has no subject (sub)")
    groups = groups_of(oidc, claims)
    users = get_user_model()
    with transaction.atomic():
        identity = (
            ExternalIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=oidc.issuer, subject=subject)
            .first()
        )
        if identity is None:
            username = _username(oidc, claims)
            if users.objects.filter(username__iexact=username).exists():
                raise SignInRefused(
                    f"a Headway account named {username!r} exists and is not linked to this "
                    "provider account: an admin links it (admin site, External identities) "
                    "or renames one of them"
                )
            user = users(username=username)
            user.set_unusable_password()
            user.save()
            identity = ExternalIdentity.objects.create(
                user=user, issuer=oidc.issuer, subject=subject
            )
        user = identity.user
        if not user.is_active:
            raise SignInRefused(f"the account {user.get_username()!r} is deactivated")
        email = claims.get("email")
        if isinstance(email, str) and email and claims.get("email_verified", True) is not False:
            user.email = email[:254]
        if oidc.admin_groups:
            user.is_staff = bool(oidc.admin_groups.intersection(groups))
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups])
        ExternalIdentity.objects.filter(pk=identity.pk).update(last_login_at=timezone.now())
    return user
