"""Static files (local Swagger UI, hashed + compressed assets) and the site's error pages.

Static files: WhiteNoise (https://whitenoise.readthedocs.io) serves ``collectstatic``'s
content-hashed copies with an immutable one-year ``Cache-Control`` and their ``.gz`` variants;
drf-spectacular-sidecar ships Swagger UI so the schema page needs no CDN. Error pages: Django's
``handler404``/``handler403``/``handler500`` defaults render ``404.html``/``403.html``/``500.html``.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse
from django.templatetags.static import static
from django.test import Client, RequestFactory
from django.urls import include, path
from django.views.defaults import permission_denied

from tests.helpers import REPO

MANIFEST_STORAGE = "config.staticfiles.CompressedManifestStorage"


def _boom(request: HttpRequest) -> HttpResponse:
    """A view that fails, for the 500 page (served through ``urlpatterns`` below)."""
    raise RuntimeError("boom")


# URLconf for the 500 test: the site's routes (base.html reverses them) plus a failing view.
urlpatterns = [path("boom/", _boom), path("", include("config.urls"))]


def _local_asset_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_swagger_ui_uses_only_local_assets(client_alice: Client) -> None:
    client = client_alice  # the schema and its UI need a login
    response = client.get("/api/v1/schema/ui/")
    assert response.status_code == 200
    html = response.content.decode()
    # No CDN (jsdelivr, unpkg...) nor the public validator: no absolute http(s) URL at all.
    assert not re.search(r"https?://", html), re.findall(r"https?://[^\s\"']+", html)
    assets = _local_asset_urls(html)
    assert any(url.endswith("swagger-ui-bundle.js") for url in assets), assets
    assert any(url.endswith("swagger-ui.css") for url in assets), assets
    for url in assets:
        asset = client.get(url)
        assert asset.status_code == 200, url
        if url.startswith("/api/v1/schema/ui/?script="):
            # The split view serves its start-up script itself (no inline script: CSP).
            assert not re.search(r"https?://", asset.content.decode()), url
            continue
        assert url.startswith(settings.STATIC_URL), url
        assert b"".join(asset.streaming_content)  # type: ignore[attr-defined]


def test_production_settings_use_the_compressed_manifest_storage() -> None:
    """Outside pytest (no ``PYTEST_VERSION``) the settings pick the hashed + gzipped storage."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_VERSION"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    env["SECRET_KEY"] = "a-test-key"  # required outside the demo
    code = (
        "from django.conf import settings; "
        "print(settings.STORAGES['staticfiles']['BACKEND']); "
        "print(settings.SPECTACULAR_SETTINGS['SWAGGER_UI_DIST'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [MANIFEST_STORAGE, "SIDECAR"]


@pytest.fixture
def collected(settings, tmp_path: Path) -> Path:
    """``collectstatic`` with the production storage into a fresh STATIC_ROOT.

    Only ``static/`` is collected (not the apps' files) to keep the test fast; the storage and
    middleware are the production ones.
    """
    settings.STATIC_ROOT = tmp_path / "root"
    settings.STATICFILES_DIRS = [REPO / "static"]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": MANIFEST_STORAGE}}
    call_command("collectstatic", interactive=False, verbosity=0)
    return settings.STATIC_ROOT


def test_hashed_asset_is_immutable_and_gzipped(collected: Path) -> None:
    url = static("plotly/plotly-headway.min.js")
    assert re.fullmatch(r"/static/plotly/plotly-headway\.min\.[0-9a-f]{12}\.js", url), url
    assert (collected / url.removeprefix("/static/")).with_suffix(".js.gz").is_file()
    client = Client()  # a new client builds a new WhiteNoise middleware over the new root

    plain = client.get(url)
    assert plain.status_code == 200
    assert "immutable" in plain["Cache-Control"]
    max_age = int(re.search(r"max-age=(\d+)", plain["Cache-Control"]).group(1))  # type: ignore[union-attr]
    assert max_age >= 365 * 24 * 3600
    assert "Content-Encoding" not in plain
    body = b"".join(plain.streaming_content)  # type: ignore[attr-defined]

    zipped = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert zipped.status_code == 200
    assert zipped["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in zipped["Vary"]
    compressed = b"".join(zipped.streaming_content)  # type: ignore[attr-defined]
    assert len(compressed) < len(body) // 2
    assert gzip.decompress(compressed) == body


def test_unhashed_name_without_manifest_still_served(settings, tmp_path: Path) -> None:
    """No collectstatic yet (non-strict manifest): plain names, served from the finders."""
    settings.STATIC_ROOT = tmp_path / "empty"
    settings.STATIC_ROOT.mkdir()
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {"BACKEND": MANIFEST_STORAGE}}
    url = static("css/dashboard.css")
    assert url == "/static/css/dashboard.css"
    response = Client().get(url)
    assert response.status_code == 200
    assert "immutable" not in response["Cache-Control"]


def _assert_site_layout(html: str) -> None:
    assert 'class="topbar"' in html
    assert '<a class="brand"' in html
    assert "· Headway</title>" in html


def test_404_page_uses_site_layout() -> None:
    response = Client().get("/no/such/page/")
    assert response.status_code == 404
    html = response.content.decode()
    _assert_site_layout(html)
    assert "<title>Not found · Headway</title>" in html
    assert "/no/such/page/" in html


def test_403_page_uses_site_layout() -> None:
    request = RequestFactory().get("/experiments/1/")
    response = permission_denied(request, PermissionDenied())
    assert response.status_code == 403
    html = response.content.decode()
    _assert_site_layout(html)
    assert "<title>Forbidden · Headway</title>" in html


@pytest.mark.urls(__name__)
def test_500_page_uses_site_layout() -> None:
    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    html = response.content.decode()
    _assert_site_layout(html)
    assert "<title>Server error · Headway</title>" in html
    assert "boom" not in html  # no traceback or message leaks with DEBUG off
