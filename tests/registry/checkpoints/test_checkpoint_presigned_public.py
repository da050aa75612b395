"""Finding: "the presigned download link points at `http://minio:9000`, which no user can reach".

A storage location's ``public_endpoint_url`` is the same S3 service under the name users reach;
the presigned links the registry redirects to name it. Here the registry talks to moto's server
(a real S3 endpoint over HTTP) as ``127.0.0.1`` and users know it as ``localhost``: the link
names ``localhost``, and it downloads the file with no credentials.
"""

from __future__ import annotations

import urllib.parse
import uuid

import pytest
import requests
from django.core.exceptions import ImproperlyConfigured

from config.storage_locations import load_storage_locations
from headway.storage import build_storage_manager
from tests.helpers_checkpoints import store_over_rest, trial_on_storage

pytestmark = pytest.mark.django_db

URL = "/api/v1/checkpoints/{}/download"
DATA = b"weights " * 1000


def _locations(tmp_path, settings, **bucket_fields: str) -> None:
    fields = ", ".join(f"{key}: '{value}'" for key, value in bucket_fields.items())
    path = tmp_path / "locations.yaml"
    path.write_text(f"locations:\n  bucket: {{type: s3, {fields}}}\n")
    settings.HEADWAY_STORAGE_LOCATIONS = load_storage_locations(str(path))


def test_finding_presigned_links_name_the_locations_public_endpoint(
    api, tmp_path, settings, s3_endpoint
):
    internal = urllib.parse.urlsplit(s3_endpoint)
    assert internal.hostname == "127.0.0.1"
    public = f"http://localhost:{internal.port}"
    bucket = f"pub-{uuid.uuid4().hex[:8]}"
    _locations(
        tmp_path, settings, bucket=bucket, endpoint_url=s3_endpoint, public_endpoint_url=public
    )
    build_storage_manager({"type": "s3", "bucket": bucket, "endpoint_url": s3_endpoint})._client.create_bucket(Bucket=bucket)  # fmt: skip
    trial = trial_on_storage(api, {"location": "bucket"})
    # What trials get (the stored config) names the internal endpoint only.
    stored = trial.experiment.config["checkpoint_storage"]
    assert stored["endpoint_url"] == s3_endpoint and "public_endpoint_url" not in stored
    storage_id = store_over_rest(api, trial, {"model.pt": DATA}, 3)

    response = api.get(URL.format(storage_id), {"path": "model.pt", "redirect": "presigned"})
    assert response.status_code == 302, response.content
    link = urllib.parse.urlsplit(response["Location"])
    assert (link.scheme, link.hostname, link.port) == ("http", "localhost", internal.port)
    fetched = requests.get(response["Location"], timeout=30)  # no credentials, no token
    assert fetched.status_code == 200 and fetched.content == DATA


def test_without_a_public_endpoint_links_name_the_endpoint(api, tmp_path, settings, s3_endpoint):
    bucket = f"pub-{uuid.uuid4().hex[:8]}"
    _locations(tmp_path, settings, bucket=bucket, endpoint_url=s3_endpoint)
    build_storage_manager({"type": "s3", "bucket": bucket, "endpoint_url": s3_endpoint})._client.create_bucket(Bucket=bucket)  # fmt: skip
    trial = trial_on_storage(api, {"location": "bucket"})
    storage_id = store_over_rest(api, trial, {"model.pt": DATA}, 3)
    response = api.get(URL.format(storage_id), {"path": "model.pt", "redirect": "presigned"})
    assert response.status_code == 302
    assert response["Location"].startswith(s3_endpoint + "/")


@pytest.mark.parametrize("bad", ["minio:9000", "http://u:p@s3.example.com", "http://h/path"])
def test_a_public_endpoint_that_is_no_http_url_of_a_host_stops_start_up(tmp_path, bad):
    path = tmp_path / "locations.yaml"
    path.write_text(f"locations:\n  b: {{type: s3, bucket: ckpts, public_endpoint_url: '{bad}'}}\n")
    with pytest.raises(ImproperlyConfigured, match=r"locations\.b\.public_endpoint_url"):
        load_storage_locations(str(path))
