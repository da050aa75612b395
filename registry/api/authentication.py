"""Token authentication for users and for trial runs.

Both send ``Authorization: Token <key>``. A user token authenticates its user; a trial-run token
authenticates the experiment's owner with ``request.auth`` set to the ``TrialRun``, which the
permission class then limits to that trial (docs/rest-api.md).
"""

from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from registry.models import RunState, TrialRun


class HeadwayTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str):
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
        return run.trial.experiment.owner, run
