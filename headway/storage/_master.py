"""``MasterStorageManager``: checkpoints written and read through the master's REST API.

For an unmanaged run (``headway.experimental.core_v2``) on a machine that cannot reach the
admin's storage location (no shared_fs mount, no S3 credentials or route): ``store_path``
yields a local temporary folder and, when the block exits, sends each file with
``PUT unmanaged/trials/{id}/runs/{run}/checkpoints/{storage_id}/files/?path=...`` (the run's
token); the master writes it into the trial's storage location. Reads use the checkpoint's
download route (``GET checkpoints/{uuid}/download/?path=...``), so only registered checkpoints
can be read back. Each file is retried through a master or storage outage for
``HEADWAY_STORAGE_RETRY_SECONDS`` (``_retry``), the whole file again each time: the master
replaces a file sent twice, so a retry stores it once.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import pathlib
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import requests

from headway.client import APIError, RegistryAPI, Session
from headway.storage._base import (
    StorageManager,
    check_relpath,
    check_storage_id,
    list_local_files,
)
from headway.storage._retry import retry_transient

logger = logging.getLogger("headway.storage")

# Answers that mean "the master or its storage is away for a while", worth sending again.
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
_CHUNK = 1024 * 1024


def transient_master_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a master outage: no answer at all (connection refused or reset,
    timeout) or a 429/5xx answer. A 4xx (bad path, too large, not this run's) is final."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return True
    return isinstance(exc, APIError) and (exc.status is None or exc.status in _TRANSIENT_STATUSES)


class MasterStorageManager(StorageManager):
    """Checkpoint files sent to and read from the master, which stores them in the trial's
    storage location (docs/logging-from-anywhere.md, "Checkpoints through the master").

    Arguments:
        master_url (str): the registry, e.g. ``http://127.0.0.1:8000``.
        token (str): the run's token (or its owner's).
        trial_id (int), run_id (int): the unmanaged run whose checkpoints these are.
        timeout (float): seconds one request may wait for the master (default 300: a large
            file is written to storage before the master answers).
    """

    def __init__(
        self, master_url: str, token: str, trial_id: int, run_id: int, *, timeout: float = 300.0
    ) -> None:
        # No retries in the session: a retried PUT must send its file again from the start,
        # which only the loop here (``retry_transient``) does.
        self._session = Session(master_url, token, max_retries=0, timeout=timeout)
        self._api = RegistryAPI.from_session(self._session)
        self._ids = {"trial_id": trial_id, "run_id": run_id}
        self._sent: dict[str, dict[str, int]] = {}  # files this process sent, per storage id

    def __repr__(self) -> str:
        return f"MasterStorageManager({self._session.master_url!r})"

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a temporary folder; when the block exits normally, send every file in it to
        the master (one request per file) and remove the folder. If the block raises nothing
        is sent.

        Raises:
            headway.client.APIError: the master refused a file (400 bad path, 403 not this
                run's, 409 already registered, 413 over ``HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES``),
                or stayed away longer than ``HEADWAY_STORAGE_RETRY_SECONDS``.
        """
        check_storage_id(storage_id)
        with tempfile.TemporaryDirectory(prefix="headway-ckpt-") as tmp:
            root = pathlib.Path(tmp)
            yield root
            files = list_local_files(root)
            for relpath in files:
                self._put(storage_id, relpath, root / relpath)
            self._sent.setdefault(storage_id, {}).update(files)

    def _put(self, storage_id: str, relpath: str, source: pathlib.Path) -> None:
        route = self._api.path(
            "unmanaged_checkpoint_file", "PUT", storage_id=storage_id, **self._ids
        )

        def send() -> None:
            with source.open("rb") as body:  # from the start again on every attempt
                self._session.request(
                    "PUT",
                    route,
                    params={"path": relpath},
                    data=body,
                    headers={"Content-Type": "application/octet-stream"},
                )

        retry_transient(
            f"upload of {relpath} of checkpoint {storage_id} through the master",
            send,
            transient_master_error,
        )

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """Yield a temporary folder holding the files of registered checkpoint ``storage_id``,
        downloaded one by one; removed when the block exits.

        Raises:
            FileNotFoundError: the master knows no such checkpoint.
        """
        files = self.list_files(storage_id)
        with tempfile.TemporaryDirectory(prefix="headway-restore-") as tmp:
            root = pathlib.Path(tmp)
            for relpath in files:
                target = root / check_relpath(relpath)
                target.parent.mkdir(parents=True, exist_ok=True)
                retry_transient(
                    f"download of {relpath} of checkpoint {storage_id} through the master",
                    functools.partial(self._fetch, storage_id, relpath, target),
                    transient_master_error,
                )
            yield root

    def _fetch(self, storage_id: str, relpath: str, target: pathlib.Path) -> None:
        response = self._download(storage_id, relpath)
        with contextlib.closing(response), target.open("wb") as fh:  # a retry starts it anew
            for chunk in response.iter_content(_CHUNK):
                fh.write(chunk)

    def _download(self, storage_id: str, relpath: str, start: int = 0) -> requests.Response:
        try:
            return self._api.checkpoint_download(storage_id, path=relpath, offset=start)
        except APIError as exc:
            if exc.status == 404:
                raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}") from exc
            raise

    def list_files(self, storage_id: str) -> dict[str, int]:
        """The files of the registered checkpoint (its ``resources``), or those this process
        sent for one not registered yet.

        Raises:
            FileNotFoundError: neither.
        """
        check_storage_id(storage_id)
        try:
            row = self._api.checkpoint_get(storage_id)
        except APIError as exc:
            if exc.status == 404 and storage_id in self._sent:
                return dict(self._sent[storage_id])
            if exc.status == 404:
                raise FileNotFoundError(f"checkpoint {storage_id} not found") from exc
            raise
        return dict(row.resources)

    def open_file(
        self, storage_id: str, relpath: str, *, start: int = 0, end: int | None = None
    ) -> BinaryIO:
        """Read one file of a registered checkpoint from ``start`` on (a ``Range`` request),
        held in memory (meant for small files such as ``metadata.json``; ``restore_path``
        streams to disk); bytes past ``end`` may follow (read ``end - start``)."""
        check_relpath(relpath)
        with contextlib.closing(self._download(storage_id, relpath, start)) as response:
            data = response.content
            # 200 instead of 206: the server sent the whole file.
            return io.BytesIO(data if start == 0 or response.status_code == 206 else data[start:])

    def file_size(self, storage_id: str, relpath: str) -> int:
        """The registered size of one file of the checkpoint."""
        check_relpath(relpath)
        files = self.list_files(storage_id)
        if relpath not in files:
            raise FileNotFoundError(f"checkpoint {storage_id} has no file {relpath!r}")
        return files[relpath]

    def delete(self, storage_id: str) -> None:
        """Nothing to do here: the master owns stored files. A checkpoint whose upload failed
        half-way is an orphan, removed by the registry's checkpoint GC after its grace period."""
        logger.info("checkpoint %s: left to the registry's orphan clean-up", storage_id)
        self._sent.pop(storage_id, None)

    def read_marker(self, storage_id: str) -> dict[str, object] | None:
        """None: the marker is the master's to read."""
        return None

    def exists(self, storage_id: str) -> bool:
        """Whether the checkpoint is registered (or was sent by this process)."""
        try:
            self.list_files(storage_id)
        except FileNotFoundError:
            return False
        return True
