"""REST client for the Headway registry: token auth, retries with backoff, typed errors."""

from headway.client._errors import (
    APIError,
    BadRequestError,
    ConflictError,
    MasterUnreachableError,
    NotFoundError,
    UnauthenticatedError,
)
from headway.client._lazy_wire import wire
from headway.client._registry_api import RegistryAPI
from headway.client._routes import EXPERIMENT_ACTIONS, TRIAL_ACTIONS
from headway.client._session import Session, fetch_all
from headway.client._token_file import read_token, resolve_token, save_token, token_file

__all__ = [
    "EXPERIMENT_ACTIONS",
    "TRIAL_ACTIONS",
    "APIError",
    "BadRequestError",
    "ConflictError",
    "MasterUnreachableError",
    "NotFoundError",
    "RegistryAPI",
    "Session",
    "UnauthenticatedError",
    "fetch_all",
    "read_token",
    "resolve_token",
    "save_token",
    "token_file",
    "wire",
]
