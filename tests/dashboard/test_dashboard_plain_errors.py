"""A dashboard 400 that repeats what the request sent is plain text, never HTML: an injected
``<meta http-equiv="refresh">`` (which the CSP does not stop) or form must not reach a browser as
markup. The model-definition viewer's ``?path=`` and the list's bulk ``action``."""

from __future__ import annotations

import pytest
from django.urls import reverse

from registry.lifecycle import experiment_create
from tests.helpers import TINY_CONFIG, TINY_MODEL

pytestmark = pytest.mark.django_db

META = '<meta http-equiv="refresh" content="0;url=https://evil.example/">'


def _is_plain_text(response) -> bool:
    return response["Content-Type"].split(";")[0].strip() == "text/plain"


@pytest.mark.parametrize("path", [f"../{META}", f"/{META}", f"a/../../{META}"])
def test_a_bad_file_path_comes_back_as_plain_text(client_alice, alice, path) -> None:
    experiment = experiment_create(
        owner=alice, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    url = reverse("dashboard:experiment-files", args=[experiment.id])
    response = client_alice.get(url, {"path": path})
    assert response.status_code == 400
    assert _is_plain_text(response), response["Content-Type"]
    assert response.content.decode().startswith("path: ")


def test_an_unknown_bulk_action_comes_back_as_plain_text(client_alice) -> None:
    response = client_alice.post(reverse("dashboard:experiments-bulk"), {"action": META})
    assert response.status_code == 400
    assert _is_plain_text(response), response["Content-Type"]
    assert "Unknown bulk action" in response.content.decode()
