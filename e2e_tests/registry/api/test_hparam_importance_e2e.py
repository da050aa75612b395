"""Hyperparameter importance through a real Celery worker: the request queues the fit (202), the
master's worker fits it, and the same request then answers the stored result (200).

The unit tests (tests/registry/test_hparam_importance.py) run the task in the test process."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from tests.helpers import wait_for
from tests.helpers_hparams import hparam_search


@pytest.mark.integration
@pytest.mark.slow
def test_the_worker_fits_what_the_request_queued(cluster_api, cluster_token):
    owner = Token.objects.get(key=cluster_token).user
    experiment, _ = hparam_search(owner, 20)
    url = f"{cluster_api.url}/api/v1/experiments/{experiment.id}/hparam-importance/"
    queued = cluster_api.http.get(url, timeout=60)
    assert queued.status_code == 202, queued.text
    assert int(queued.headers["Retry-After"]) > 0

    def fitted():
        answer = cluster_api.http.get(url, timeout=60)
        assert answer.status_code in (200, 202), answer.text
        return answer.json() if answer.status_code == 200 else None

    body = wait_for(fitted, 120, "the worker's importance fit", interval=1)
    assert body["trials"] == 20 and body["hparams_varying"] == 4
    assert {h["name"] for h in body["hparams"][:2]} == {"lr", "optimizer"}
