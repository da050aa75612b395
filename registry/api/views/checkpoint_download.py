"""``GET /api/v1/checkpoints/{uuid}/download``: a checkpoint's files streamed from storage.

The whole checkpoint comes as ``?format=tar`` (default), ``tgz`` or ``zip``, each built on the fly
from storage with bounded memory (no temporary archive). ``?path=FILE`` answers one file with
``Content-Length`` and single-range ``Range`` support (resumable downloads), or, for S3 storage
with ``&redirect=presigned``, a 302 to a short-lived presigned URL of the bucket's endpoint.
"""

from __future__ import annotations

import hashlib
import mimetypes
import pathlib

from django.conf import settings
from django.http import FileResponse, HttpResponseRedirect, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response
from werkzeug.http import parse_range_header

from headway.archive import UnsafeArchivePath, check_member_path
from headway.storage import (
    ReadAhead,
    StorageManager,
    iter_tar_chunks,
    iter_tgz_chunks,
    open_file_range,
    tar_size,
    zip_stream,
)
from headway.storage._archive_stream import CHUNK_SIZE
from headway.storage._shared_fs_check import unreadable_message
from registry.api.schema import ErrorSerializer
from registry.errors import InvalidInput, RegistryError
from registry.storage_endpoints import registry_storage_manager

# format -> (Content-Type, file name extension)
FORMATS = {
    "tar": ("application/x-tar", "tar"),
    "tgz": ("application/gzip", "tar.gz"),
    "zip": ("application/zip", "zip"),
}
REDIRECTS = ("presigned",)
PARAMS = ("format", "path", "redirect")
DOWNLOAD_FIELDS = ("uuid", "storage", "resources")  # what ``download`` reads of a checkpoint


class CheckpointGone(RegistryError):
    """410: the checkpoint is registered but none of its files is in storage any more."""

    status = 410


class CheckpointStorageUnreadable(RegistryError):
    """409: a shared_fs checkpoint whose folder this server cannot list (not mounted here).

    Not a 5xx: the SDK retries 502/503/504 as a master outage for up to
    ``HEADWAY_MASTER_OUTAGE_SECONDS``, and nothing changes by retrying until an admin mounts
    the folder on the server."""

    status = 409


class CheckpointFileMissing(RegistryError):
    """404: a file the registry lists for the checkpoint is missing from storage."""

    status = 404


class CheckpointNotArchivable(RegistryError):
    """409: storage holds a file of the checkpoint whose path no archive may carry (one that
    could escape on extraction); its files can still be fetched one by one (``?path=``)."""

    status = 409


def _check_params(query_params) -> dict[str, str]:
    """The download parameters, each given at most once with a legal value, else 400."""
    unknown = sorted(set(query_params) - set(PARAMS))
    if unknown:
        allowed = ", ".join(PARAMS)
        raise InvalidInput({name: [f"unknown parameter; allowed: {allowed}."] for name in unknown})
    params: dict[str, str] = {}
    for name in PARAMS:
        values = query_params.getlist(name)
        if len(values) > 1:
            raise InvalidInput({name: ["give this parameter at most once."]})
        if values:
            params[name] = values[0]
    if "format" in params and params["format"] not in FORMATS:
        raise InvalidInput({"format": [f"must be one of {', '.join(FORMATS)}."]})
    if "redirect" in params and params["redirect"] not in REDIRECTS:
        raise InvalidInput({"redirect": [f"must be one of {', '.join(REDIRECTS)}."]})
    if "path" in params and "format" in params:
        raise InvalidInput({"format": ["applies to whole-checkpoint archives, not to ?path=."]})
    if "redirect" in params and "path" not in params:
        raise InvalidInput({"redirect": ["needs ?path=FILE: only single files are presigned."]})
    return params


class CheckpointDownloadMixin:
    """The ``download`` action of ``CheckpointViewSet``."""

    def get_queryset(self):
        # A download reads only where the files are and which they are: not the trial row
        # (select_related by the viewset) nor the metadata, whose loading and JSON decoding
        # were most of a small download's server time (docs/decisions/checkpoints.md).
        queryset = super().get_queryset()
        if getattr(self, "action", None) == "download":
            return queryset.select_related(None).only(*DOWNLOAD_FIELDS)
        return queryset

    def perform_content_negotiation(self, request, force=False):
        # ``?format=`` names this action's archive format, not one of DRF's renderers (DRF would
        # answer 404 for "zip"); errors of this action are rendered as JSON.
        if getattr(self, "action", None) == "download":
            force = True
        return super().perform_content_negotiation(request, force=force)

    @extend_schema(
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS), description="archive format"),
            OpenApiParameter("path", str, description="one file of the checkpoint"),
            OpenApiParameter(
                "redirect", str, enum=list(REDIRECTS), description="S3, with path: 302"
            ),
            OpenApiParameter(
                "Range", str, OpenApiParameter.HEADER, description="with path: bytes=a-b"
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            (206, "application/octet-stream"): OpenApiTypes.BINARY,
            302: OpenApiResponse(description="presigned S3 URL in Location"),
            410: OpenApiResponse(ErrorSerializer, description="files no longer in storage"),
            409: OpenApiResponse(ErrorSerializer, description="storage this server cannot read"),
            416: OpenApiResponse(description="unsatisfiable Range"),
        },
    )
    @action(detail=True, methods=["get"])
    def download(self, request, uuid=None):
        checkpoint = self.get_object()
        params = _check_params(request.query_params)
        manager = registry_storage_manager(checkpoint.storage)
        unreadable = unreadable_message(checkpoint.storage, str(checkpoint.uuid))
        if unreadable is not None:
            raise CheckpointStorageUnreadable(unreadable)
        if "path" in params:
            rel = _registered_path(params["path"], checkpoint.resources)
            if "redirect" in params:
                return _presigned_redirect(manager, str(checkpoint.uuid), rel)
            return _one_file(request, manager, str(checkpoint.uuid), rel)
        return _archive(manager, str(checkpoint.uuid), checkpoint.resources, params)


def _registered_path(path: str, resources: dict) -> pathlib.PurePosixPath:
    try:
        rel = check_member_path(path, what="checkpoint file path")
    except UnsafeArchivePath:
        rel = None
    if rel is None or str(rel) not in resources:
        raise InvalidInput(
            {"path": [f"{path!r} is not a file of this checkpoint; see its resources."]}
        )
    return rel


def _gone(storage_id: str) -> CheckpointGone:
    return CheckpointGone(f"The files of checkpoint {storage_id} are no longer in storage.")


def _file_missing(manager: StorageManager, storage_id: str, relpaths: list[str]) -> RegistryError:
    if not manager.exists(storage_id):
        return _gone(storage_id)
    names = ", ".join(relpaths)
    return CheckpointFileMissing(
        f"Checkpoint {storage_id} is registered with {names}, but storage has no such file.",
        {"path": [f"{name} is missing from storage." for name in relpaths]},
    )


def _archive(manager: StorageManager, storage_id: str, resources: dict, params: dict[str, str]):
    try:
        stored = manager.list_files(storage_id)
    except FileNotFoundError:
        raise _gone(storage_id) from None
    missing = sorted(set(resources) - set(stored))
    if missing:
        raise _file_missing(manager, storage_id, missing)
    # The registry says what the checkpoint is; the sizes are what storage holds now.
    files = {name: stored[name] for name in resources} if resources else stored
    kind = params.get("format", "tar")
    content_type, extension = FORMATS[kind]
    if kind == "zip":
        # Built in a second thread (ReadAhead): the CRC-32 of its bytes overlaps the send.
        archive = zip_stream(manager, storage_id, files)
        body = ReadAhead(archive, len(archive))
        response = StreamingHttpResponse(body, content_type=content_type)
        response["Content-Length"] = str(len(body))
    elif kind == "tgz":
        response = StreamingHttpResponse(
            ReadAhead(iter_tgz_chunks(manager, storage_id, files=files)), content_type=content_type
        )
    else:
        try:
            size = tar_size(files)  # every path checked before a byte is sent
        except UnsafeArchivePath as exc:
            raise CheckpointNotArchivable(
                f"Checkpoint {storage_id} cannot be archived: {exc}."
            ) from None
        response = StreamingHttpResponse(
            iter_tar_chunks(manager, storage_id, files=files), content_type=content_type
        )
        response["Content-Length"] = str(size)
    response["Content-Disposition"] = f'attachment; filename="{storage_id}.{extension}"'
    return response


def _stored_size(manager: StorageManager, storage_id: str, relpath: str) -> int:
    try:
        return manager.file_size(storage_id, relpath)
    except FileNotFoundError:
        raise _file_missing(manager, storage_id, [relpath]) from None


def _presigned_redirect(manager: StorageManager, storage_id: str, rel: pathlib.PurePosixPath):
    _stored_size(manager, storage_id, str(rel))  # a clear 404 here, not one from the bucket
    try:
        url = manager.presigned_url(
            storage_id,
            str(rel),
            expires_s=settings.HEADWAY_PRESIGNED_URL_SECONDS,
            content_disposition=content_disposition_header(True, rel.name),
        )
    except NotImplementedError:
        raise InvalidInput(
            {"redirect": ["presigned URLs exist only for s3 checkpoint storage."]}
        ) from None
    response = HttpResponseRedirect(url)
    response["Cache-Control"] = "no-store"  # the URL expires; never reuse a cached redirect
    return response


def _one_file(request, manager: StorageManager, storage_id: str, rel: pathlib.PurePosixPath):
    relpath = str(rel)
    size = _stored_size(manager, storage_id, relpath)
    # Registered checkpoint files never change, so path and size make a strong validator.
    digest = hashlib.sha256(f"{storage_id}/{relpath}".encode()).hexdigest()[:20]
    etag = f'"{digest}-{size}"'
    wanted = _requested_range(request, size, etag)
    if wanted == "unsatisfiable":
        return Response(
            {
                "detail": f"Range {request.headers['Range']!r} is not satisfiable for {size} bytes.",
                "errors": {"Range": ["one range of bytes=FIRST-LAST within the file."]},
            },
            status=416,
            headers={"Content-Range": f"bytes */{size}"},
        )
    start, end = wanted if isinstance(wanted, tuple) else (0, size)
    try:
        body = open_file_range(manager, storage_id, relpath, start, end)
    except FileNotFoundError:
        raise _file_missing(manager, storage_id, [relpath]) from None
    # A file object, not a generator: the WSGI server's file wrapper sends a shared_fs file
    # with sendfile (no Python copy loop); S3 bodies are read in CHUNK_SIZE pieces.
    response = FileResponse(
        body,
        status=206 if isinstance(wanted, tuple) else 200,
        content_type=mimetypes.guess_type(rel.name)[0] or "application/octet-stream",
    )
    response.block_size = CHUNK_SIZE
    response["Content-Length"] = str(end - start)
    if isinstance(wanted, tuple):
        response["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = etag
    response["Content-Disposition"] = content_disposition_header(True, rel.name)
    return response


def _requested_range(request, size: int, etag: str) -> tuple[int, int] | str | None:
    """``(start, end)`` (end exclusive) of a single satisfiable byte range; ``None`` to answer
    the whole file (no Range, another unit, several ranges, or an ``If-Range`` that is not
    this file's ETag, all as RFC 9110 allows); ``"unsatisfiable"`` for a malformed or
    out-of-file byte range (416)."""
    header = request.headers.get("Range")
    if not header:
        return None
    if_range = request.headers.get("If-Range")
    if if_range is not None and if_range.strip() != etag:
        return None
    if not header.strip().lower().startswith("bytes="):
        return None
    parsed = parse_range_header(header)
    if parsed is None:
        return "unsatisfiable"
    if len(parsed.ranges) > 1:
        return None
    found = parsed.range_for_length(size)
    return "unsatisfiable" if found is None else found
