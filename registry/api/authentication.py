"""Token authentication for users and for trial runs, with a short in-process cache.

Both send ``Authorization: Token <key>``. A user token authenticates its user; a trial-run token
authenticates the experiment's owner with ``request.auth`` set to the ``TrialRun``, which the
permission class then limits to that trial (docs/rest-api.md).

A key's answer (who it is, or that it is refused) is kept in this process for at most
``TOKEN_CACHE_SECONDS``: the token lookup was about half of a one-point metric report's database
work. Revocation is therefore honoured within that bound: a deleted token, a deactivated user or
a run that ended is refused at the latest ``TOKEN_CACHE_SECONDS`` after the change; a change
saved through the ORM in this process (a token or user deleted, a user saved, a run saved or
deleted) drops the keys it touches at once. Unknown keys are not cached, so a new token works
at once.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from django.conf import settings
from django.db.models.signals import post_delete, post_save
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from registry.models import RunState, TrialRun

# Seconds a looked-up key is trusted without asking the database again (the revocation bound).
TOKEN_CACHE_SECONDS = 5.0
# Keys kept at most; past it the cache starts over (bounded memory whatever clients send).
TOKEN_CACHE_MAX_KEYS = 10_000

# key -> (monotonic expiry, user, auth). Plain dict operations: atomic under the GIL, so the
# threads of one server share it without a lock (a race only costs one extra lookup).
_cache: dict[str, tuple[float, Any, Any]] = {}


def clear_token_cache() -> None:
    """Forget every cached key (the next request of each asks the database)."""
    _cache.clear()


def _forget_token(sender: Any, instance: Token, **kwargs: Any) -> None:
    _cache.pop(instance.key, None)


def _forget_user(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A saved or deleted user (staff flag, deactivation): drop the keys that name it."""
    for key, (_, user, _auth) in list(_cache.items()):
        if user.pk == instance.pk:
            _cache.pop(key, None)


def _forget_run(sender: Any, instance: TrialRun, **kwargs: Any) -> None:
    """A saved run (it may have exited) or a deleted one: drop its key."""
    _cache.pop(instance.token, None)


# Changes made through the ORM in this process apply at once; other processes' within the bound.
post_delete.connect(_forget_token, sender=Token, dispatch_uid="headway-token-cache")
post_save.connect(_forget_user, sender=settings.AUTH_USER_MODEL, dispatch_uid="headway-token-user")
post_delete.connect(_forget_user, sender=settings.AUTH_USER_MODEL, dispatch_uid="headway-token-ud")
post_save.connect(_forget_run, sender=TrialRun, dispatch_uid="headway-token-run")
post_delete.connect(_forget_run, sender=TrialRun, dispatch_uid="headway-token-rund")


class HeadwayTokenAuthentication(TokenAuthentication):
    """DRF token authentication for user tokens and live trial-run tokens (cached, see module).

    Raises:
        AuthenticationFailed: (401) an unknown key, an inactive user's, or an ended run's.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        now = time.monotonic()
        hit = _cache.get(key)
        if hit is not None and hit[0] > now:
            user, auth = hit[1], hit[2]
        else:
            user, auth = self._lookup(key)
            if len(_cache) >= TOKEN_CACHE_MAX_KEYS:
                _cache.clear()
            _cache[key] = (now + TOKEN_CACHE_SECONDS, user, auth)
        # Copies: a request may set attributes on its user (permission caches); the cached
        # instances stay as the database gave them, shared by the server's threads.
        return copy.copy(user), copy.copy(auth)

    @staticmethod
    def _lookup(key: str) -> tuple[Any, Any]:
        token = Token.objects.select_related("user").filter(key=key).first()
        if token is not None:
            if not token.user.is_active:
                raise AuthenticationFailed("User inactive or deleted.")
            return token.user, token
        run = (
            TrialRun.objects.select_related("trial__experiment__owner")
            .filter(token=key)
            .exclude(state=RunState.EXITED)
            .first()
        )
        if run is None:
            raise AuthenticationFailed("Invalid token.")
        owner = run.trial.experiment.owner
        # Only the run's own fields are read from request.auth (trial_id, run_id); the
        # related trial and experiment would go stale in the cache, so they are not kept.
        run._state.fields_cache.clear()
        return owner, run
