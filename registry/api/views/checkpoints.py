"""``/api/v1/checkpoints/{uuid}/``: metadata, and a streamed tar (or one file) of its files."""

import mimetypes

from django.http import FileResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action

from headway.archive import UnsafeArchivePath, check_member_path
from headway.storage import build_storage_manager, iter_tar_chunks
from registry.api.serializers import CheckpointSerializer
from registry.errors import InvalidInput, RegistryError
from registry.models import Checkpoint


class CheckpointGone(RegistryError):
    status = 410


class CheckpointViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = CheckpointSerializer
    queryset = Checkpoint.objects.select_related("trial")
    lookup_field = "uuid"
    # Trial processes read checkpoints to restore or warm-start from them.
    allow_trial_token = ("retrieve", "download")

    @extend_schema(
        parameters=[OpenApiParameter("path", str, description="one file of the checkpoint")],
        responses={(200, "application/x-tar"): bytes},
    )
    @action(detail=True, methods=["get"])
    def download(self, request, uuid=None):
        checkpoint = self.get_object()
        manager = build_storage_manager(checkpoint.storage)
        storage_id = str(checkpoint.uuid)
        if not manager.exists(storage_id):
            raise CheckpointGone(f"The files of checkpoint {storage_id} are no longer in storage.")
        path = request.query_params.get("path")
        if path:
            try:
                rel = check_member_path(path, what="checkpoint file path")
            except UnsafeArchivePath:
                rel = None
            if rel is None or str(rel) not in checkpoint.resources:
                raise InvalidInput(
                    {"path": [f"{path!r} is not a file of this checkpoint; see its resources."]}
                )
            content_type = mimetypes.guess_type(rel.name)[0] or "application/octet-stream"
            return FileResponse(
                manager.open_file(storage_id, str(rel)),
                as_attachment=True,
                filename=rel.name,
                content_type=content_type,
            )
        response = StreamingHttpResponse(
            iter_tar_chunks(manager, storage_id), content_type="application/x-tar"
        )
        response["Content-Disposition"] = f'attachment; filename="{storage_id}.tar"'
        return response
