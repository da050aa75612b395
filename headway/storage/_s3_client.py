"""The boto3 S3 clients of ``S3StorageManager``, kept per settings (building one costs ~8 ms)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Environment variables boto3's default credential chain and region read: a cached client is
# reused only while they are unchanged.
_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)
# botocore's own retries (standard mode: connection errors, 5xx, throttling such as SlowDown,
# capped exponential backoff with jitter) cover a blip of a few seconds inside one request;
# an outage of a minute is ridden out by retrying the whole transfer (``retry_transient``).
_BOTO_RETRIES: Any = {"mode": "standard", "max_attempts": 5}
_CLIENTS: dict[tuple[str | None, ...], S3Client] = {}
_CLIENTS_LOCK = threading.Lock()
_MAX_CLIENTS = 16


def _client(
    endpoint_url: str | None, access_key: str | None, secret_key: str | None, region: str | None
) -> S3Client:
    """A boto3 S3 client for these settings, shared by every manager that names the same ones.

    Building a client costs about 8 ms (200 ms for the first in a process, which loads the
    service model): the registry builds a manager per download request, so the client is kept
    (boto3 clients are thread-safe). At most ``_MAX_CLIENTS`` are kept, the oldest dropped.
    """
    key = (endpoint_url, access_key, secret_key, region, *map(os.environ.get, _AWS_ENV))
    with _CLIENTS_LOCK:  # boto3's default session is not safe to build clients from in parallel
        client = _CLIENTS.get(key)
        if client is None:
            client = boto3.client(
                "s3",
                endpoint_url=endpoint_url,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
                region_name=region,
                # SigV4 everywhere, presigned URLs included (AWS retired SigV2; X-Amz-Expires).
                config=botocore.config.Config(signature_version="s3v4", retries=_BOTO_RETRIES),
            )
            if len(_CLIENTS) >= _MAX_CLIENTS:
                _CLIENTS.pop(next(iter(_CLIENTS)))
            _CLIENTS[key] = client
        return client
