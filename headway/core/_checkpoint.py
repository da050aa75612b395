"""``CheckpointContext``: write checkpoints straight to storage, then register them.

Mirrors Determined's ``core.CheckpointContext`` (``store_path``, ``restore_path``, ``upload``,
``download``, ``get_metadata``, ``delete``). Files go to the storage backend first; only a
complete checkpoint is registered.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import os
import pathlib
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from headway.core._checkpoint_metadata import (
    METADATA_FILE,
    agree_on_shard,
    check_metadata,
    write_metadata,
)
from headway.core._checkpoint_registry import CheckpointRegistry, LocalCheckpointRegistry
from headway.core._disk_full import disk_full_is_reported
from headway.core._distributed import DistributedContext
from headway.core._metrics import json_safe_metrics
from headway.storage import StorageManager
from headway.storage._base import list_local_files
from headway.storage._retry import retry_transient, transient_os_error

logger = logging.getLogger("headway.core")


class DownloadMode(enum.Enum):
    """How the workers of one node get a checkpoint's files.

    - ``LocalWorkersShareDownload`` (default): the local chief fetches, the others wait and use
      its copy (every local worker must call ``restore_path``/``download`` together).
    - ``NoSharedDownload``: every worker fetches its own copy (no collective).
    """

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    NoSharedDownload = "NO_SHARED_DOWNLOAD"


class CheckpointContext:
    """Saves, restores and inspects checkpoints of this trial.

    Built by ``core.init()``. Checkpoint ids (``storage_id``) are uuid4 strings. Every
    checkpoint directory gets a ``metadata.json`` with the user metadata, which must contain
    ``steps_completed`` (the batches trained when it was taken).

    Arguments:
        distributed (DistributedContext): ranks (only the chief stores unless ``shard=True``).
        storage_manager (StorageManager): where the files go.
        registry (CheckpointRegistry): where finished checkpoints are recorded.
    """

    def __init__(
        self,
        *,
        distributed: DistributedContext,
        storage_manager: StorageManager,
        registry: CheckpointRegistry,
    ) -> None:
        self._dist = distributed
        self._storage = storage_manager
        self._registry = registry
        self._file_writers: list[Callable[[pathlib.Path], None]] = []

    def _add_file_writer(self, writer: Callable[[pathlib.Path], None]) -> Callable[[], None]:
        """Have ``writer(path)`` add files to every checkpoint the chief stores from now on.

        Used by the PyTorch harness for ``load_data.json``, ``code/`` and ``tensorboard/``; it
        runs after the ``store_path`` block, before ``metadata.json`` and registration. Returns
        a function that removes the writer.
        """
        self._file_writers.append(writer)
        return lambda: self._file_writers.remove(writer)

    def _write_files(self, path: pathlib.Path, metadata: dict[str, Any]) -> None:
        for writer in self._file_writers:
            writer(path)
        write_metadata(path, metadata)

    @property
    def storage_manager(self) -> StorageManager:
        """The backend checkpoints are written to."""
        return self._storage

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict[str, Any], *, shard: bool = False
    ) -> Iterator[tuple[pathlib.Path, str]]:
        """Yield ``(path, storage_id)``: write the checkpoint's files under ``path``.

        With ``shared_fs`` storage ``path`` is the final directory (no copy). On normal exit
        ``metadata.json`` is written, the files are listed (relative path -> bytes) and the
        checkpoint is registered. If the block raises, the partial checkpoint is deleted, nothing
        is registered, and the exception propagates.

        Arguments:
            metadata (dict): JSON-serializable; must contain ``steps_completed`` (int).
            shard (bool): False: chief only. True: every rank calls it and writes its own files
                into the same checkpoint (ranks must avoid writing the same file names). The
                checkpoint's metadata is every rank's ``metadata`` merged (as in Determined):
                dicts under one key merge key by key, a key several ranks give must have the
                same value on each, and ``steps_completed`` may be given by one rank only.

        Raises:
            ValueError: when ``metadata`` lacks ``steps_completed`` or it is not an int >= 0;
                with ``shard=True`` on every rank, before anything is stored, when some rank's
                metadata is invalid or ranks give different values for one key (naming the
                key's path, e.g. ``/loss``, and the ranks).
            TypeError: naming a metadata key whose value is not JSON-serializable.
            RuntimeError: ``shard=False`` on a non-chief rank; with ``shard=True`` when another
                rank failed.
            headway.core.CheckpointStorageFull: the block (or the metadata written after it)
                failed because the checkpoint's filesystem is full; the message names the
                folder and the space left (torch's own error for this is obscure).

        .. code::

            with core_context.checkpoint.store_path({"steps_completed": 100}) as (path, uuid):
                torch.save(model.state_dict(), path / "state_dict.pth")
        """
        if not shard and self._dist.rank != 0:
            raise RuntimeError(
                "store_path(shard=False) may only be called on the chief; use shard=True to "
                "write from every rank"
            )
        if not shard:
            metadata = check_metadata(metadata)
            steps_completed = metadata["steps_completed"]
            storage_id = str(uuid.uuid4())
            with self._storage.store_path(storage_id) as path, disk_full_is_reported(path):
                yield path, storage_id
                self._write_files(path, metadata)
                # What the block wrote is what storage holds once the block exits: listed here,
                # it costs no listing round trip to the bucket after the upload.
                resources = list_local_files(path)
            self._registry.register(storage_id, steps_completed, resources, metadata)
            return
        storage_id, metadata = agree_on_shard(self._dist, metadata)
        steps_completed = metadata["steps_completed"]
        error: BaseException | None = None
        try:
            with self._storage.store_path(storage_id) as path, disk_full_is_reported(path):
                yield path, storage_id
                if self._dist.rank == 0:
                    self._write_files(path, metadata)
        except BaseException as exc:  # every rank must reach the allgather below
            error = exc
        failed = [r for r, ok in enumerate(self._dist.allgather(error is None)) if not ok]
        if error is not None:
            raise error
        if failed:
            if self._dist.rank == 0:
                self._storage.delete(storage_id)
            raise RuntimeError(f"checkpoint {storage_id} aborted: ranks {failed} failed")
        if self._dist.rank == 0:
            self._register(storage_id, steps_completed, metadata)
        self._dist.barrier()  # nobody reads the checkpoint before it is registered

    def _register(self, storage_id: str, steps_completed: int, metadata: dict[str, Any]) -> None:
        resources = self._storage.list_files(storage_id)
        self._registry.register(storage_id, steps_completed, resources, metadata)

    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: dict[str, Any],
        *,
        shard: bool = False,
    ) -> str:
        """Copy the directory ``ckpt_dir`` into a new checkpoint; return its ``storage_id``.

        Same rules as ``store_path`` (``ckpt_dir`` may be None on ranks that have nothing to
        add with ``shard=True``). Prefer ``store_path`` to avoid the extra copy.

        Raises:
            FileNotFoundError: when ``ckpt_dir`` is not a directory.
        """
        if ckpt_dir is not None and not os.path.isdir(ckpt_dir):
            raise FileNotFoundError(f"upload(): ckpt_dir {str(ckpt_dir)!r} is not a directory")
        with self.store_path(metadata, shard=shard) as (path, storage_id):
            if ckpt_dir is not None:
                # Copying again overwrites the same files: safe to retry a file-server hiccup.
                retry_transient(
                    f"copy into checkpoint {storage_id}",
                    lambda: shutil.copytree(ckpt_dir, path, dirs_exist_ok=True),
                    transient_os_error,
                )
        return storage_id

    @contextlib.contextmanager
    def restore_path(
        self, storage_id: str, download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload
    ) -> Iterator[pathlib.Path]:
        """Yield a local directory with the checkpoint's files, valid inside the block.

        ``shared_fs``: the checkpoint directory itself (read it, don't modify it).

        Raises:
            FileNotFoundError: when the checkpoint is not in storage.
        """
        if download_mode is DownloadMode.NoSharedDownload or self._dist.local_size == 1:
            with self._storage.restore_path(storage_id) as path:
                yield path
            return
        if self._dist.local_rank != 0:
            status, value = self._dist.broadcast_local(None)
            if status != "ok":
                raise FileNotFoundError(value)
            try:
                yield pathlib.Path(value)
            finally:
                self._dist.allgather_local(None)  # the local chief keeps the files until here
            return
        try:
            with self._storage.restore_path(storage_id) as path:
                self._dist.broadcast_local(("ok", str(path)))
                try:
                    yield path
                finally:
                    self._dist.allgather_local(None)
        except FileNotFoundError as exc:
            self._dist.broadcast_local(("error", str(exc)))
            raise

    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
    ) -> None:
        """Copy the checkpoint's files into ``ckpt_dir`` (created if needed).

        With ``LocalWorkersShareDownload`` only the local chief copies and the others wait, so
        ``ckpt_dir`` must be the same on every local rank.
        """
        shared = download_mode is DownloadMode.LocalWorkersShareDownload

        def copy() -> None:
            with self._storage.restore_path(storage_id) as path:
                shutil.copytree(path, ckpt_dir, dirs_exist_ok=True)

        if not shared or self._dist.local_rank == 0:
            # Storage retries its own transfer; this also retries reading a shared_fs
            # checkpoint through a file-server hiccup (docs/checkpoints.md, storage outages).
            retry_transient(f"download of checkpoint {storage_id}", copy, transient_os_error)
        if shared:
            self._dist.allgather_local(None)

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """Return the checkpoint's metadata dict.

        Managed mode asks the registry (``GET checkpoints/{uuid}/``); local mode reads
        ``metadata.json`` from storage.

        Raises:
            FileNotFoundError / headway.client.NotFoundError: unknown checkpoint.
        """
        metadata = self._registry.get_metadata(storage_id)
        if metadata is not None:
            return metadata
        with self._storage.open_file(storage_id, METADATA_FILE) as fh:
            return dict(json.load(fh))

    def set_metadata(self, storage_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
        """Add keys to a stored checkpoint's metadata (keys already there are replaced); return
        the whole metadata, as ``get_metadata`` will.

        Managed mode: the registry's copy (``POST checkpoints/{uuid}/metadata/``, the same as
        ``headway.experimental.client.Checkpoint.add_metadata``); ``metadata.json`` in storage
        keeps what was stored, as in Determined. Local mode: ``metadata.json`` itself
        (``shared_fs`` storage only). ``steps_completed`` cannot be changed. Determined 0.38's
        Core API has no such call (its experimental client has ``add_metadata``).

        Raises:
            ValueError: when ``metadata`` is not a dict or changes ``steps_completed``.
            TypeError: naming a key whose value is not JSON-serializable.
            FileNotFoundError / headway.client.NotFoundError: unknown checkpoint.
            NotImplementedError: local mode with storage other than ``shared_fs``.
            headway.client.APIError: the registry refused (e.g. not this trial's checkpoint).
        """
        if not isinstance(metadata, dict):
            raise ValueError(f"checkpoint metadata must be a dict, got {type(metadata).__name__}")
        safe = json_safe_metrics(metadata, what="checkpoint metadata", metric_limits=False)
        merged = self._registry.add_metadata(storage_id, safe)
        if merged is not None:
            return merged
        base = getattr(self._storage, "base_path", None)
        if base is None:
            raise NotImplementedError(
                f"set_metadata() in local mode needs shared_fs storage, not {self._storage}"
            )
        with self._storage.open_file(storage_id, METADATA_FILE) as fh:
            current = dict(json.load(fh))
        steps = safe.get("steps_completed", current.get("steps_completed"))
        if steps != current.get("steps_completed"):
            raise ValueError(
                "set_metadata() cannot change steps_completed "
                f"({current.get('steps_completed')!r} -> {steps!r})"
            )
        current.update(safe)
        write_metadata(pathlib.Path(base) / storage_id, current)
        return current

    def delete(self, storage_id: str) -> None:
        """Delete the checkpoint's files (local mode only).

        Raises:
            RuntimeError: in managed mode, where the registry owns checkpoint lifetime
                (its garbage-collection policy deletes files and rows together).
        """
        if not isinstance(self._registry, LocalCheckpointRegistry):
            raise RuntimeError(
                "deleting a registered checkpoint is done by the registry, not the trial"
            )
        self._storage.delete(storage_id)
