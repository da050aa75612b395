"""``S3StorageManager``: checkpoints as objects ``<prefix>/<storage_id>/<relpath>`` in a bucket.

Uploads and downloads use boto3's managed transfer (multipart, parallel threads); reads for the
registry stream ``get_object`` bodies. Works with AWS S3 and S3-compatible servers (MinIO, moto)
through ``endpoint_url``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig

from headway.storage._base import (
    StorageManager,
    check_relpath,
    check_storage_id,
    list_local_files,
)

if TYPE_CHECKING:
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

_TRANSFER = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)


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
    ) -> None:
        if not bucket:
            raise ValueError("checkpoint_storage.bucket is required for type 's3'")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.tmp_dir = tmp_dir
        self._client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name=region,
        )

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> S3StorageManager:
        """Build from ``{"type": "s3", "bucket", "prefix"?, "endpoint_url"?, "access_key"?,
        "secret_key"?, "region"?}``; missing keys fall back to boto3's own defaults.

        Raises:
            ValueError: when ``bucket`` is missing.
        """
        bucket = config.get("bucket")
        if not isinstance(bucket, str) or not bucket:
            raise ValueError("checkpoint_storage.bucket is required for type 's3'")
        return cls(
            bucket,
            str(config.get("prefix") or ""),
            endpoint_url=config.get("endpoint_url") or os.environ.get("HEADWAY_S3_ENDPOINT_URL"),
            access_key=config.get("access_key"),
            secret_key=config.get("secret_key"),
            region=config.get("region"),
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
        """Yield a temporary directory; upload its files when the block exits normally."""
        prefix = self._key_prefix(storage_id)
        with tempfile.TemporaryDirectory(prefix="headway-ckpt-", dir=self.tmp_dir) as tmp:
            root = pathlib.Path(tmp)
            yield root
            try:
                for relpath in list_local_files(root):
                    self._client.upload_file(
                        str(root / relpath), self.bucket, prefix + relpath, Config=_TRANSFER
                    )
            except BaseException:
                self.delete(storage_id)  # no half-uploaded checkpoint is left behind
                raise

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Download every object into a temporary directory, removed after the block."""
        files = self.list_files(storage_id)
        prefix = self._key_prefix(storage_id)
        with tempfile.TemporaryDirectory(prefix="headway-restore-", dir=self.tmp_dir) as tmp:
            root = pathlib.Path(tmp)
            for relpath in files:
                target = root / check_relpath(relpath)
                target.parent.mkdir(parents=True, exist_ok=True)
                self._client.download_file(
                    self.bucket, prefix + relpath, str(target), Config=_TRANSFER
                )
            yield root

    def list_files(self, storage_id: str) -> dict[str, int]:
        """Return ``{relative path: size}`` of the checkpoint's objects.

        Raises:
            FileNotFoundError: when no object has the checkpoint's prefix.
        """
        files = {k: v for k, v in self._keys(storage_id).items() if k and not k.endswith("/")}
        if not files:
            raise FileNotFoundError(f"checkpoint {storage_id} not found in s3://{self.bucket}")
        return files

    def open_file(self, storage_id: str, relpath: str) -> BinaryIO:
        """Return the streaming body of one object (``read(n)``, ``close()``, ``with``)."""
        key = self._key_prefix(storage_id) + str(check_relpath(relpath))
        try:
            # botocore's StreamingBody is a file-like io.IOBase; callers only read and close it.
            return cast(BinaryIO, self._client.get_object(Bucket=self.bucket, Key=key)["Body"])
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}") from exc
            raise

    def presigned_url(self, storage_id: str, relpath: str, expires_s: int = 3600) -> str:
        """A time-limited GET URL for one file (the registry may redirect downloads to it)."""
        key = self._key_prefix(storage_id) + str(check_relpath(relpath))
        return self._client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_s
        )

    def delete(self, storage_id: str) -> None:
        """Delete every object of the checkpoint (1000 keys per request)."""
        prefix = self._key_prefix(storage_id)
        keys = [prefix + rel for rel in self._keys(storage_id)]
        for start in range(0, len(keys), 1000):
            chunk: list[ObjectIdentifierTypeDef] = [
                {"Key": key} for key in keys[start : start + 1000]
            ]
            self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})

    def exists(self, storage_id: str) -> bool:
        """Return True when at least one object has the checkpoint's prefix."""
        answer = self._client.list_objects_v2(
            Bucket=self.bucket, Prefix=self._key_prefix(storage_id), MaxKeys=1
        )
        return int(answer.get("KeyCount", 0)) > 0
