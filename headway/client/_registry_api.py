"""``RegistryAPI``: the one typed REST client of the registry, one method per endpoint.

Every call goes through one route table (``ROUTES`` in ``headway.client._routes``: name ->
method and path template, as mlflow's ``rest_store`` routes each call through
``_METHOD_TO_INFO``) and the shared ``Session`` (token, retries with backoff, typed errors: a
4xx raises ``BadRequestError``, ``UnauthenticatedError``, ``NotFoundError`` or
``ConflictError``). Answers are parsed into the wire models the server builds them from
(``headway.client._wire``); routes answering DRF serializer rows return the row (``wire.Row``).

Its methods come in three groups, one module each: the worker host's routes and the host-token
admin routes (``_api_host``), a trial process's Core API calls (``_api_trial``), and a user's
calls from the CLI and the experimental client (``_api_user``), and a script's own unmanaged
run (``_api_unmanaged``), and an admin's webhooks (``_api_webhooks``), and workspaces and
projects (``_api_workspaces``). Nothing else in ``headway/`` or
``workers/`` spells an API path (a test scans for one).

.. code::

    api = RegistryAPI("http://master:8000", os.environ["HEADWAY_HOST_TOKEN"])
    host = api.host_heartbeat(pool="default", devices=["0", "1"], gpu=True,
                              started_at=started)
    if api.run_claim(trial_id, run_id, worker="gpu-a:1234").claimed:
        spec = api.run_spec(trial_id, run_id)

    user = RegistryAPI.from_session(Session(master, token, max_retries=2))
    state = user.experiment_get(3)["state"]
"""

from __future__ import annotations

from headway.client._api_host import HostAPI, LogLine
from headway.client._api_trial import TrialAPI
from headway.client._api_unmanaged import UnmanagedAPI
from headway.client._api_user import UserAPI
from headway.client._api_webhooks import WebhookAPI
from headway.client._api_workspaces import WorkspaceAPI
from headway.client._routes import ROUTES

__all__ = ["ROUTES", "LogLine", "RegistryAPI"]


class RegistryAPI(HostAPI, TrialAPI, UserAPI, UnmanagedAPI, WebhookAPI, WorkspaceAPI):
    """Typed calls to the registry at ``master_url`` with ``token`` (see module).

    Arguments:
        master_url (str): e.g. ``http://127.0.0.1:8000``.
        token (str | None): a user token, a run token or a host token (``hwh_...``).

    Raises (from every method): the ``Session``'s typed errors (``headway.client``);
    ``pydantic.ValidationError`` when an answer does not match its wire model.
    """
