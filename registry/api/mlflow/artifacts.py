"""``/api/2.0/mlflow-artifacts/artifacts``: MLflow's artifact proxy onto the experiment's storage.

A run's ``artifact_uri`` is ``mlflow-artifacts:/<experiment_id>/<run_id>/artifacts``, which the
MLflow client turns into requests here: ``PUT artifacts/<path>`` uploads one file, ``GET
artifacts/<path>`` downloads it, ``GET artifacts?path=<folder>`` lists a folder (names relative
to it, as MLflow's server answers). The files of trial ``T`` live in the experiment's
checkpoint storage location (an admin's), in the folder ``.mlflow-artifacts/T/``
(``registry.lifecycle._artifacts``), deleted with the experiment. Only the first three segments of a path (experiment, run,
``artifacts``) are the client's to choose, and they must name a run of that experiment; the rest
passes the rule of checkpoint archive members (``headway.storage.check_relpath``), and the
file's real path must stay inside the run's folder (no symbolic link out). Reading is anyone's,
uploading the run owner's (``registry.authz``). shared_fs locations only: an experiment whose
storage is S3 answers ``NOT_IMPLEMENTED``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from django.http import FileResponse, JsonResponse

from headway.storage._base import check_relpath
from registry.api.mlflow import store
from registry.api.mlflow.errors import MlflowError, invalid, not_found
from registry.api.mlflow.views import MlflowAPIView
from registry.authz import ensure_can_write_trial_data
from registry.lifecycle._artifacts import artifacts_root
from registry.models import Trial

CHUNK_BYTES = 1 << 20


def _split(user: Any, path: Any) -> tuple[Trial, str]:
    """``<experiment_id>/<run_id>/artifacts[/<relpath>]`` → the trial and the relative path
    ("" for the run's top folder)."""
    if not isinstance(path, str):
        raise invalid("An artifact path is <experiment_id>/<run_id>/artifacts/<path>.")
    parts = path.strip("/").split("/", 3)
    if len(parts) < 3 or parts[2] != "artifacts":
        raise invalid(
            f"Invalid artifact path {path!r}: it is <experiment_id>/<run_id>/artifacts/<path>."
        )
    trial = store.trial(user, parts[1])
    if str(trial.experiment_id) != parts[0]:
        raise not_found(f"Experiment {parts[0]} has no run {parts[1]}.")
    relpath = parts[3] if len(parts) == 4 else ""
    if relpath:
        try:
            check_relpath(relpath)
        except ValueError as exc:
            raise invalid(f"Invalid artifact path: {exc}.") from None
    return trial, relpath


def _root(trial: Trial) -> Path:
    """The run's artifact folder (not created here)."""
    root = artifacts_root(trial.experiment.config.get("checkpoint_storage"), trial.id)
    if root is None:
        raise MlflowError(
            "NOT_IMPLEMENTED",
            f"Experiment {trial.experiment_id}'s storage location is not shared_fs; MLflow "
            "artifacts are stored in shared_fs locations only.",
        )
    return root


def _inside(root: Path, relpath: str) -> Path:
    """``root/relpath`` when its real path stays inside ``root``'s real path."""
    target = root / relpath if relpath else root
    real_root = root.resolve()
    if target.resolve() != real_root and not target.resolve().is_relative_to(real_root):
        raise invalid(f"Artifact path {relpath!r} leads outside the run's artifacts.")
    return target


class ArtifactListView(MlflowAPIView):
    """``GET artifacts?path=<experiment_id>/<run_id>/artifacts[/<folder>]``."""

    def get(self, request: Any) -> JsonResponse:
        user = self.caller(request)
        trial, relpath = _split(user, request.query_params.get("path"))
        folder = _inside(_root(trial), relpath)
        files = []
        if folder.is_dir() and not folder.is_symlink():
            for entry in sorted(folder.iterdir()):
                if entry.is_symlink() or entry.name.startswith(".tmp-"):
                    continue
                if entry.is_dir():
                    files.append({"path": entry.name, "is_dir": True})
                elif entry.is_file():
                    size = entry.stat().st_size
                    files.append({"path": entry.name, "is_dir": False, "file_size": size})
        return JsonResponse({"files": files})


class ArtifactFileView(MlflowAPIView):
    """``PUT`` (upload) and ``GET`` (download) ``artifacts/<experiment_id>/<run_id>/artifacts/<path>``."""

    parser_classes = ()  # the body is the file's bytes, read as a stream

    def get(self, request: Any, artifact_path: str) -> FileResponse:
        user = self.caller(request)
        trial, relpath = _split(user, artifact_path)
        target = _inside(_root(trial), relpath)
        if not relpath or target.is_symlink() or not target.is_file():
            raise not_found(f"No artifact {relpath!r} in run {trial.id}.")
        return FileResponse(target.open("rb"), content_type="application/octet-stream")

    def put(self, request: Any, artifact_path: str) -> JsonResponse:
        user = self.caller(request)
        trial, relpath = _split(user, artifact_path)
        if not relpath:
            raise invalid("An upload names a file: <experiment_id>/<run_id>/artifacts/<path>.")
        ensure_can_write_trial_data(user, trial.id, run_trial_id=None)
        root = _root(trial)
        root.mkdir(parents=True, exist_ok=True)
        target = _inside(root, relpath)
        if target.is_dir():
            raise invalid(f"Artifact path {relpath!r} is a folder.")
        target.parent.mkdir(parents=True, exist_ok=True)
        target = _inside(root, relpath)  # a folder made above may not be a link out either
        # Written aside and renamed: a reader never sees half a file, a retried upload replaces it.
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := request.stream.read(CHUNK_BYTES) if request.stream else b"":
                    out.write(chunk)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return JsonResponse({})
