"""Checkpoint storage backends, shared by the SDK (writes) and the registry (downloads).

Never imports Django. ``build_storage_manager(config)`` picks the backend from an experiment's
``checkpoint_storage``; ``iter_tar_chunks`` streams a checkpoint as a tar (``tar_size`` bytes);
``direct_reader`` / ``copy_direct`` read a registered checkpoint straight from a mounted
shared_fs folder (``DownloadMode.DIRECT``); ``MasterStorageManager`` sends and fetches an
unmanaged run's checkpoint files through the master.
"""

from headway.storage._archive_stream import (
    FileRange,
    iter_file_chunks,
    iter_tgz_chunks,
    open_file_range,
    zip_stream,
)
from headway.storage._base import StorageManager
from headway.storage._build import build, build_storage_manager
from headway.storage._direct import DirectReadUnavailable, DownloadMode, copy_direct, direct_reader
from headway.storage._read_ahead import ReadAhead
from headway.storage._shared_fs import SharedFSStorageManager
from headway.storage._tar import iter_tar_chunks, tar_size

__all__ = [
    "DirectReadUnavailable",
    "DownloadMode",
    "FileRange",
    "MasterStorageManager",
    "ReadAhead",
    "S3StorageManager",
    "SharedFSStorageManager",
    "StorageManager",
    "build",
    "build_storage_manager",
    "copy_direct",
    "direct_reader",
    "iter_file_chunks",
    "iter_tar_chunks",
    "iter_tgz_chunks",
    "open_file_range",
    "tar_size",
    "zip_stream",
]


def __getattr__(name: str) -> object:
    # boto3 is heavy; import the S3 backend only when someone asks for it.
    if name == "S3StorageManager":
        from headway.storage._s3 import S3StorageManager

        return S3StorageManager
    if name == "MasterStorageManager":  # the REST client: only unmanaged runs need it
        from headway.storage._master import MasterStorageManager

        return MasterStorageManager
    raise AttributeError(f"module 'headway.storage' has no attribute {name!r}")
