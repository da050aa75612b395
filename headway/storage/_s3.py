"""``S3StorageManager``: checkpoints as objects ``<prefix>/<storage_id>/<relpath>`` in a bucket.

Uploads and downloads use boto3's managed transfer (multipart, parallel threads); reads for the
registry stream ``get_object`` bodies. Works with AWS S3 and S3-compatible servers (MinIO, moto)
through ``endpoint_url``.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import pathlib
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, cast

import botocore.config
import botocore.exceptions
import s3transfer.exceptions
from boto3.s3.transfer import TransferConfig, create_transfer_manager

from headway.storage._base import (
    MARKER_FILE,
    MAX_MARKER_BYTES,
    Readable,
    StorageManager,
    check_relpath,
    check_storage_id,
    is_storage_id,
    list_local_files,
    marker_bytes,
    parse_marker,
)
from headway.storage._retry import retry_transient
from headway.storage._s3_client import _client

if TYPE_CHECKING:
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

logger = logging.getLogger("headway.storage")

# One managed transfer for all the files of a checkpoint: files move in parallel (max_concurrency
# threads shared by all files), big files in multipart pieces; memory ~ chunksize * concurrency.
_TRANSFER = TransferConfig(
    multipart_threshold=16 << 20, multipart_chunksize=16 << 20, max_concurrency=10
)


# Error codes S3 answers while it is overloaded or restarting (any 5xx is retried too).
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeTooSkewed",
    }
)


class S3StorageManager(StorageManager):
    """Checkpoints stored in an S3 bucket.

    ``store_path`` yields a local temporary directory and uploads it when the block exits
    normally; ``restore_path`` downloads into a temporary directory removed after the block.

    Arguments:
        bucket (str): bucket name.
        prefix (str): key prefix (no leading/trailing ``/`` needed).
        endpoint_url (str | None): S3-compatible endpoint, e.g. ``http://minio:9000``.
        access_key (str | None), secret_key (str | None): credentials; default: boto3's chain
            (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, profiles, instance roles).
        region (str | None): region name.
        tmp_dir (str | None): where temporary checkpoint directories go (default ``$TMPDIR``).
        public_endpoint_url (str | None): the same S3 service as users reach it (e.g.
            ``https://s3.example.com`` for ``http://minio:9000``), named by presigned URLs
            only (``presigned_url``); default: ``endpoint_url``.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        region: str | None = None,
        tmp_dir: str | None = None,
        public_endpoint_url: str | None = None,
    ) -> None:
        if not bucket:
            raise ValueError("checkpoint_storage.bucket is required for type 's3'")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.tmp_dir = tmp_dir
        self._client = _client(endpoint_url, access_key, secret_key, region)
        # Signing makes no request: the public name need not resolve here.
        self._presign_client = (
            _client(public_endpoint_url, access_key, secret_key, region)
            if public_endpoint_url
            else self._client
        )

    def __repr__(self) -> str:
        return f"S3StorageManager(bucket={self.bucket!r}, prefix={self.prefix!r})"

    def _key_prefix(self, storage_id: str) -> str:
        check_storage_id(storage_id)
        return f"{self.prefix}/{storage_id}/" if self.prefix else f"{storage_id}/"

    def _keys(self, storage_id: str) -> dict[str, int]:
        prefix = self._key_prefix(storage_id)
        found: dict[str, int] = {}
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                found[obj["Key"][len(prefix) :]] = int(obj["Size"])
        return found

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a temporary directory; upload its files when the block exits normally.

        The marker (``MARKER_FILE``) is uploaded first, so a checkpoint whose upload dies
        half-way is provably Headway's for the registry's orphan clean-up."""
        prefix = self._key_prefix(storage_id)
        with tempfile.TemporaryDirectory(prefix="headway-ckpt-", dir=self.tmp_dir) as tmp:
            root = pathlib.Path(tmp)
            yield root
            try:
                retry_transient(
                    f"upload of checkpoint {storage_id} to s3://{self.bucket}/{prefix}",
                    lambda: self._upload(storage_id, root),
                    transient_s3_error,
                )
            except BaseException:
                try:
                    self.delete(storage_id)  # no half-uploaded checkpoint is left behind
                except Exception as exc:  # storage still down: the registry's GC finds it
                    logger.warning(
                        "storage: could not delete partial checkpoint %s: %s", storage_id, exc
                    )
                raise

    def _upload(self, storage_id: str, root: pathlib.Path) -> None:
        """Upload the marker, then every file under ``root``: one attempt, safe to repeat (the
        same keys are written again, so a retry leaves no duplicate)."""
        prefix = self._key_prefix(storage_id)
        self._client.put_object(
            Bucket=self.bucket, Key=prefix + MARKER_FILE, Body=marker_bytes(storage_id)
        )
        # The TransferManager cancels the pending transfers (and aborts multipart uploads)
        # when the block raises.
        with create_transfer_manager(self._client, _TRANSFER) as transfers:
            futures = [
                transfers.upload(str(root / relpath), self.bucket, prefix + relpath)
                for relpath in list_local_files(root)
            ]
            for future in futures:
                future.result()

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Download every object (in parallel, ranged GETs for big ones) into a temporary
        directory, removed after the block whether it exits normally or not."""
        with tempfile.TemporaryDirectory(prefix="headway-restore-", dir=self.tmp_dir) as tmp:
            root = pathlib.Path(tmp)
            retry_transient(
                f"download of checkpoint {storage_id} from s3://{self.bucket}",
                lambda: self._download(storage_id, root),
                transient_s3_error,
            )
            yield root

    def _download(self, storage_id: str, root: pathlib.Path) -> None:
        """List and download every file into ``root``: one attempt, safe to repeat (files are
        written again whole)."""
        files = self.list_files(storage_id)
        prefix = self._key_prefix(storage_id)
        with create_transfer_manager(self._client, _TRANSFER) as transfers:
            futures = []
            for relpath in files:
                target = root / check_relpath(relpath)
                target.parent.mkdir(parents=True, exist_ok=True)
                futures.append(transfers.download(self.bucket, prefix + relpath, str(target)))
            for future in futures:
                future.result()

    def list_files(self, storage_id: str) -> dict[str, int]:
        """Return ``{relative path: size}`` of the checkpoint's objects.

        Raises:
            FileNotFoundError: when no object has the checkpoint's prefix.
        """
        files = {
            k: v
            for k, v in self._keys(storage_id).items()
            if k and not k.endswith("/") and k != MARKER_FILE
        }
        if not files:
            raise FileNotFoundError(f"checkpoint {storage_id} not found in s3://{self.bucket}")
        return files

    def open_file(
        self, storage_id: str, relpath: str, *, start: int = 0, end: int | None = None
    ) -> BinaryIO:
        """Return the streaming body of one object (``read(n)``, ``close()``, ``with``); with
        ``start``/``end`` only those bytes, fetched with an HTTP ``Range`` GET."""
        key = self._key_prefix(storage_id) + str(check_relpath(relpath))
        try:
            if start or end is not None:
                byte_range = f"bytes={start}-{'' if end is None else end - 1}"
                answer = self._client.get_object(Bucket=self.bucket, Key=key, Range=byte_range)
            else:
                answer = self._client.get_object(Bucket=self.bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}") from exc
            raise
        # botocore's StreamingBody is a file-like io.IOBase; callers only read and close it.
        return cast(BinaryIO, answer["Body"])

    def file_size(self, storage_id: str, relpath: str) -> int:
        """Size in bytes of one object (a ``HEAD`` request)."""
        key = self._key_prefix(storage_id) + str(check_relpath(relpath))
        try:
            return int(self._client.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
        except botocore.exceptions.ClientError as exc:
            if _missing(exc):
                raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}") from exc
            raise

    def presigned_url(
        self,
        storage_id: str,
        relpath: str,
        expires_s: int = 300,
        content_disposition: str | None = None,
    ) -> str:
        """A time-limited GET URL for one file (the registry may redirect downloads to it).

        The URL names this manager's ``public_endpoint_url`` (else ``endpoint_url``), so it
        works for whoever can reach that endpoint, with no credentials. ``content_disposition`` is the
        ``Content-Disposition`` header S3 answers with (e.g. ``attachment; filename="x.pt"``).
        """
        key = self._key_prefix(storage_id) + str(check_relpath(relpath))
        params = {"Bucket": self.bucket, "Key": key}
        if content_disposition:
            params["ResponseContentDisposition"] = content_disposition
        return self._presign_client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires_s
        )

    def put_file(
        self, storage_id: str, relpath: str, body: Readable, *, trial_id: int | None = None
    ) -> int:
        """Upload ``body`` (multipart in pieces) as ``<prefix>/<storage_id>/<relpath>``, the
        marker first when missing; the same key again replaces the object. See
        ``StorageManager.put_file``."""
        rel = check_relpath(relpath)
        if str(rel) == MARKER_FILE:
            raise ValueError(f"checkpoint file path {relpath!r} is reserved for the marker")
        prefix = self._key_prefix(storage_id)
        if self.read_marker(storage_id) is None:
            marker = marker_bytes(storage_id, trial_id)
            self._client.put_object(Bucket=self.bucket, Key=prefix + MARKER_FILE, Body=marker)
        counted = _Counted(body)
        self._client.upload_fileobj(cast(BinaryIO, counted), self.bucket, prefix + str(rel))
        return counted.size

    def delete(self, storage_id: str) -> None:
        """Delete every object of the checkpoint (1000 keys per request)."""
        prefix = self._key_prefix(storage_id)
        keys = [prefix + rel for rel in self._keys(storage_id)]
        for start in range(0, len(keys), 1000):
            chunk: list[ObjectIdentifierTypeDef] = [
                {"Key": key} for key in keys[start : start + 1000]
            ]
            self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})

    def list_storage_ids(self) -> dict[str, datetime.datetime]:
        """Every first key segment under ``prefix`` named like a storage id, with the newest
        ``LastModified`` of its objects (one listing of the prefix, 1000 keys per request)."""
        base = f"{self.prefix}/" if self.prefix else ""
        found: dict[str, datetime.datetime] = {}
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=base):
            for obj in page.get("Contents", []):
                storage_id, sep, _ = obj["Key"][len(base) :].partition("/")
                if not sep or not is_storage_id(storage_id):
                    continue
                modified = obj["LastModified"]
                if storage_id not in found or modified > found[storage_id]:
                    found[storage_id] = modified
        return found

    def read_marker(self, storage_id: str) -> dict[str, object] | None:
        """The marker's fields (``parse_marker``), or None when the object is missing."""
        key = self._key_prefix(storage_id) + MARKER_FILE
        try:
            answer = self._client.get_object(
                Bucket=self.bucket, Key=key, Range=f"bytes=0-{MAX_MARKER_BYTES}"
            )
        except botocore.exceptions.ClientError as exc:
            if _missing(exc) or exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return None
            raise
        with contextlib.closing(answer["Body"]) as body:
            return parse_marker(body.read(), storage_id)

    def exists(self, storage_id: str) -> bool:
        """Return True when at least one object has the checkpoint's prefix."""
        answer = self._client.list_objects_v2(
            Bucket=self.bucket, Prefix=self._key_prefix(storage_id), MaxKeys=1
        )
        return int(answer.get("KeyCount", 0)) > 0


class _Counted:
    """A read-only stream that counts the bytes read through it."""

    def __init__(self, body: Readable) -> None:
        self._body = body
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._body.read(size)
        self.size += len(data)
        return data


def transient_s3_error(exc: BaseException) -> bool:
    """Whether an S3 call's error may heal by waiting: no connection, a timeout, a dropped
    connection, a 5xx answer or throttling (``SlowDown``). Access denied, no such bucket and
    other 4xx answers are not (retrying cannot fix them)."""
    if isinstance(exc, s3transfer.exceptions.RetriesExceededError):  # a download's socket errors
        exc = exc.last_exception
    if isinstance(
        exc,
        (
            botocore.exceptions.ConnectionError,  # EndpointConnectionError, ConnectTimeoutError
            botocore.exceptions.HTTPClientError,  # ReadTimeoutError, ConnectionClosedError
            botocore.exceptions.IncompleteReadError,
        ),
    ):
        return True
    if isinstance(exc, botocore.exceptions.ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        code = exc.response.get("Error", {}).get("Code")
        return status >= 500 or code in _TRANSIENT_CODES
    return False


def _missing(exc: botocore.exceptions.ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound")
