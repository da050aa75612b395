"""``PUT unmanaged/trials/{id}/runs/{run}/checkpoints/{storage_id}/files/?path=FILE``: one
checkpoint file of an unmanaged run, sent through the master because the script cannot reach
the storage location itself (``headway.storage.MasterStorageManager``).

The body is the file's bytes, streamed into the trial's storage location (the admin's, from the
experiment's stored ``checkpoint_storage``) by the same storage code that serves downloads
(``StorageManager.put_file``), never read whole into memory; at most
``HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES`` (413 beyond). The same path sent again replaces the
file, so a retried upload stores it once. The checkpoint is registered afterwards, as any
trial's, with ``POST trials/{id}/checkpoints/``; a registered checkpoint's files never change
(409).
"""

from __future__ import annotations

from typing import BinaryIO

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from headway.storage._base import MARKER_FILE, check_relpath, check_storage_id
from registry.api.params import single_value
from registry.api.views.unmanaged import TAG, _RunView
from registry.authz import NotPermitted
from registry.errors import IllegalTransition, InvalidInput, PayloadTooLarge, RegistryError
from registry.models import Checkpoint, Trial
from registry.storage_endpoints import registry_storage_manager


class LengthRequired(RegistryError):
    """411: an upload without ``Content-Length`` (its size must be known before it is read)."""

    status = 411


class _Body:
    """The request body, read in pieces: exactly ``length`` bytes or an error, so a client
    that disconnects half-way never leaves a cut file behind (``put_file`` drops its
    temporary file when reading fails)."""

    def __init__(self, stream: BinaryIO | None, length: int) -> None:
        self._stream = stream
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0 or self._stream is None:
            if self._left > 0:
                raise InvalidInput({"body": ["the body ended before Content-Length bytes."]})
            return b""
        want = self._left if size is None or size < 0 else min(size, self._left)
        data = self._stream.read(want)
        if not data:
            raise InvalidInput({"body": ["the body ended before Content-Length bytes."]})
        self._left -= len(data)
        return data


def _checked_names(storage_id: str, path: str | None) -> str:
    try:
        check_storage_id(storage_id)
    except ValueError as exc:
        raise InvalidInput({"storage_id": [str(exc)]}) from None
    if not path:
        raise InvalidInput({"path": ["required: the file's path inside the checkpoint."]})
    try:
        rel = check_relpath(path)
    except ValueError as exc:
        raise InvalidInput({"path": [str(exc)]}) from None
    if rel.parts[0] == MARKER_FILE:
        raise InvalidInput({"path": [f"{MARKER_FILE} is reserved for the checkpoint marker."]})
    return str(rel)


def _content_length(request) -> int:
    limit = settings.HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES
    raw = request.META.get("CONTENT_LENGTH") or ""
    if not raw.strip().isdigit():
        raise LengthRequired(
            "Send the file with Content-Length.", {"Content-Length": ["required, in bytes."]}
        )
    size = int(raw)
    if size > limit:
        message = f"{size} bytes is over HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES={limit}."
        raise PayloadTooLarge(message, {"body": [message]})
    return size


class UnmanagedCheckpointFileView(_RunView):
    @extend_schema(
        tags=TAG,
        summary="Store one checkpoint file of an unmanaged run",
        parameters=[
            OpenApiParameter("path", str, required=True, description="the file in the checkpoint")
        ],
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={
            200: inline_serializer(
                "UnmanagedCheckpointFileStored",
                {"path": serializers.CharField(), "size": serializers.IntegerField()},
            )
        },
    )
    def put(self, request, trial_id: int, run_id: int, storage_id: str):
        """Write the body as file ``path`` of checkpoint ``storage_id`` in the trial's storage
        location (replacing an earlier upload of that path). 400 naming ``storage_id`` or
        ``path`` (a safe canonical relative path, as checkpoint ``resources``), 403 for a
        checkpoint another trial wrote, 409 once it is registered, 411 without
        ``Content-Length``, 413 over ``HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES``."""
        self.check_run(request, trial_id, run_id)
        relpath = _checked_names(storage_id, single_value(request, "path"))
        size = _content_length(request)
        owner = Checkpoint.objects.filter(uuid=storage_id).values_list("trial_id", flat=True)
        if owner.exists():
            if owner.first() != trial_id:
                raise NotPermitted(f"Checkpoint {storage_id} belongs to another trial.")
            raise IllegalTransition(
                f"Checkpoint {storage_id} is registered; its files no longer change."
            )
        trial = Trial.objects.select_related("experiment").get(id=trial_id)
        manager = registry_storage_manager(trial.experiment.config["checkpoint_storage"])
        marker = manager.read_marker(storage_id)
        if (marker is None and manager.exists(storage_id)) or (
            marker is not None and marker.get("trial_id") != trial_id
        ):
            raise NotPermitted(f"Storage id {storage_id} is another trial's checkpoint.")
        try:
            stored = manager.put_file(
                storage_id, relpath, _Body(request.stream, size), trial_id=trial_id
            )
        except ValueError as exc:
            raise InvalidInput({"path": [str(exc)]}) from None
        return Response({"path": relpath, "size": stored})
