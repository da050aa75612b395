"""REST checkpoint downloads: tar / tgz / zip archives, single files with Range, presigned S3
redirects, and every bad input, against shared_fs and S3 (moto's server mode over HTTP)."""

from __future__ import annotations

import io
import os
import tarfile
import uuid
import zipfile

import pytest
import requests

from headway.storage import build_storage_manager
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

pytestmark = pytest.mark.django_db

FILES = {
    "model/state.pth": os.urandom(3 * (1 << 20) + 123),  # several 1 MiB chunks, odd tail
    "model/opt/adam.pt": os.urandom(1000),
    "notes.txt": b"hello",
    "empty.bin": b"",
}
URL = "/api/v1/checkpoints/{}/download"


@pytest.fixture
def stored(api, checkpoint_storage):
    """``(storage_id, manager)`` of a registered checkpoint holding ``FILES``."""
    trial = trial_on_storage(api, checkpoint_storage)
    storage_id = store_over_rest(api, trial, FILES, 5)
    return storage_id, build_storage_manager(checkpoint_storage)


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


def test_each_archive_format_holds_every_file(api, stored):
    storage_id, _ = stored
    tar = api.get(URL.format(storage_id))
    assert tar.status_code == 200 and tar["Content-Type"] == "application/x-tar"
    data = body_of(tar)
    assert int(tar["Content-Length"]) == len(data)  # known before the first byte: progress
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        assert {m.name: archive.extractfile(m).read() for m in archive.getmembers()} == FILES
    tgz = api.get(URL.format(storage_id), {"format": "tgz"})
    assert tgz.status_code == 200 and tgz["Content-Type"] == "application/gzip"
    assert tgz["Content-Disposition"] == f'attachment; filename="{storage_id}.tar.gz"'
    with tarfile.open(fileobj=io.BytesIO(body_of(tgz)), mode="r:gz") as archive:
        assert {m.name: archive.extractfile(m).read() for m in archive.getmembers()} == FILES
    zipped = api.get(URL.format(storage_id), {"format": "zip"})
    assert zipped.status_code == 200 and zipped["Content-Type"] == "application/zip"
    data = body_of(zipped)
    assert int(zipped["Content-Length"]) == len(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        assert {name: archive.read(name) for name in archive.namelist()} == FILES


def test_one_file_with_length_and_ranges(api, stored):
    storage_id, _ = stored
    data = FILES["model/state.pth"]
    url = URL.format(storage_id)
    whole = api.get(url, {"path": "model/state.pth"})
    assert whole.status_code == 200 and whole["Accept-Ranges"] == "bytes"
    assert int(whole["Content-Length"]) == len(data) and body_of(whole) == data
    etag = whole["ETag"]
    for header, (first, last) in {
        "bytes=10-99": (10, 99),
        "bytes=-5": (len(data) - 5, len(data) - 1),
        f"bytes={len(data) - 7}-": (len(data) - 7, len(data) - 1),
        "bytes=1048570-2097160": (1048570, 2097160),  # across the server's 1 MiB pieces
        f"bytes=0-{10 * len(data)}": (0, len(data) - 1),  # the end is clipped to the file
    }.items():
        part = api.get(url, {"path": "model/state.pth"}, HTTP_RANGE=header)
        assert part.status_code == 206, header
        assert part["Content-Range"] == f"bytes {first}-{last}/{len(data)}"
        assert int(part["Content-Length"]) == last - first + 1
        assert body_of(part) == data[first : last + 1]
    same = api.get(url, {"path": "model/state.pth"}, HTTP_RANGE="bytes=5-9", HTTP_IF_RANGE=etag)
    assert same.status_code == 206 and body_of(same) == data[5:10]
    # A stale validator or several ranges: the whole file, as RFC 9110 allows (never a wrong part).
    stale = api.get(url, {"path": "model/state.pth"}, HTTP_RANGE="bytes=5-9", HTTP_IF_RANGE='"x"')
    several = api.get(url, {"path": "model/state.pth"}, HTTP_RANGE="bytes=0-1,5-6")
    for response in (stale, several):
        assert response.status_code == 200 and body_of(response) == data


@pytest.mark.parametrize("header", ["bytes=99999999-", "bytes=9-2", "bytes=a-b", "bytes="])
def test_an_unsatisfiable_or_malformed_range_is_416(api, stored, header):
    storage_id, _ = stored
    response = api.get(URL.format(storage_id), {"path": "notes.txt"}, HTTP_RANGE=header)
    assert response.status_code == 416
    assert response["Content-Range"] == "bytes */5"
    assert "Range" in response.json()["errors"]


def test_a_range_of_an_empty_file_is_416(api, stored):
    storage_id, _ = stored
    response = api.get(URL.format(storage_id), {"path": "empty.bin"}, HTTP_RANGE="bytes=0-")
    assert response.status_code == 416 and response["Content-Range"] == "bytes */0"
    whole = api.get(URL.format(storage_id), {"path": "empty.bin"})
    assert whole.status_code == 200 and whole["Content-Length"] == "0" and body_of(whole) == b""


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"format": "rar"}, "format"),
        ({"format": "json"}, "format"),
        ({"fmt": "zip"}, "fmt"),
        ({"redirect": "always", "path": "notes.txt"}, "redirect"),
        ({"redirect": "presigned"}, "redirect"),
        ({"path": "notes.txt", "format": "zip"}, "format"),
        ({"path": "../x"}, "path"),
        ({"path": "/etc/passwd"}, "path"),
        ({"path": "model/../notes.txt"}, "path"),
        ({"path": ""}, "path"),
        ({"path": "not-there.bin"}, "path"),
    ],
)
def test_bad_parameters_are_400_naming_them(api, stored, params, field):
    storage_id, _ = stored
    response = api.get(URL.format(storage_id), params)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_a_repeated_parameter_is_400(api, stored):
    storage_id, _ = stored
    response = api.get(URL.format(storage_id) + "?format=zip&format=tar")
    assert response.status_code == 400 and "format" in response.json()["errors"]


def test_unknown_checkpoint_is_404(api):
    assert api.get(URL.format(uuid.uuid4())).status_code == 404
    assert api.get(URL.format(uuid.uuid4()), {"format": "zip"}).status_code == 404


def test_a_registered_file_missing_from_storage_is_404_naming_it(api, stored, checkpoint_storage):
    storage = checkpoint_storage
    storage_id, manager = stored
    if storage["type"] == "s3":
        manager._client.delete_object(
            Bucket=storage["bucket"], Key=f"runs/{storage_id}/model/opt/adam.pt"
        )
    else:
        os.remove(os.path.join(storage["host_path"], storage_id, "model/opt/adam.pt"))
    one = api.get(URL.format(storage_id), {"path": "model/opt/adam.pt"})
    assert one.status_code == 404 and "model/opt/adam.pt" in one.json()["detail"]
    for kind in ("tar", "tgz", "zip"):
        archive = api.get(URL.format(storage_id), {"format": kind})
        assert archive.status_code == 404 and "model/opt/adam.pt" in archive.json()["detail"]
    assert api.get(URL.format(storage_id), {"path": "notes.txt"}).status_code == 200
    manager.delete(storage_id)
    assert api.get(URL.format(storage_id), {"path": "notes.txt"}).status_code == 410
    assert api.get(URL.format(storage_id), {"format": "zip"}).status_code == 410


def test_presigned_redirect_needs_s3_and_serves_the_file_without_credentials(
    api, stored, checkpoint_storage, settings
):
    storage = checkpoint_storage
    storage_id, _ = stored
    settings.HEADWAY_PRESIGNED_URL_SECONDS = 120
    params = {"path": "model/state.pth", "redirect": "presigned"}
    response = api.get(URL.format(storage_id), params)
    if storage["type"] == "shared_fs":
        assert response.status_code == 400 and "redirect" in response.json()["errors"]
        return
    assert response.status_code == 302 and response["Cache-Control"] == "no-store"
    location = response["Location"]
    assert location.startswith(storage["endpoint_url"] + "/") and "X-Amz-Expires=120" in location
    fetched = requests.get(location, timeout=30)  # no AWS credentials, no Headway token
    assert fetched.status_code == 200 and fetched.content == FILES["model/state.pth"]
    assert "state.pth" in fetched.headers["Content-Disposition"]
    ranged = requests.get(location, headers={"Range": "bytes=3-6"}, timeout=30)
    assert ranged.status_code == 206 and ranged.content == FILES["model/state.pth"][3:7]


def test_a_tar_of_a_path_no_archive_may_carry_is_409_before_any_byte(api, stored):
    storage_id, manager = stored
    if not hasattr(manager, "base_path"):
        pytest.skip("a shared_fs folder can hold such a name; an S3 key list is the registry's")
    from registry.models import Checkpoint

    # Registered without resources: the archive is whatever storage holds.
    Checkpoint.objects.filter(uuid=storage_id).update(resources={})
    (manager.base_path / storage_id / "a\\b.txt").write_bytes(b"x")
    answer = api.get(URL.format(storage_id))
    assert answer.status_code == 409 and "a\\\\b.txt" in answer.json()["detail"]
    assert not answer.streaming  # a JSON error, not a stream cut after its first bytes
