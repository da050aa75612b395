"""REST client for the Headway registry: token auth, retries with backoff, typed errors."""

from headway.client import _wire as wire
from headway.client._errors import (
    APIError,
    BadRequestError,
    ConflictError,
    MasterUnreachableError,
    NotFoundError,
    UnauthenticatedError,
)
from headway.client._registry_api import RegistryAPI
from headway.client._session import Session

__all__ = [
    "APIError",
    "BadRequestError",
    "ConflictError",
    "MasterUnreachableError",
    "NotFoundError",
    "RegistryAPI",
    "Session",
    "UnauthenticatedError",
    "wire",
]
