"""A user's REST view of a test cluster (``ClusterAPI``), shared by the fixtures of
tests/plugin_processes.py and the tests that start servers of their own."""

from __future__ import annotations

import io
from pathlib import Path

from tests.helpers import b64, wait_for


class ClusterAPI:
    """A user's REST view of the test cluster (requests + token), with helpers to submit and wait."""

    def __init__(self, url: str, token: str) -> None:
        import requests

        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, **params):
        """GET ``/api/v1/{path}``'s JSON (asserted 200). A 503 (nginx while no web server
        answers, or the master shedding reads) is asked again after its ``Retry-After``, for
        up to 2 minutes, as the SDK does."""
        import time

        deadline = time.monotonic() + 120
        while True:
            response = self.http.get(f"{self.url}/api/v1/{path}", params=params, timeout=60)
            if response.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(min(float(response.headers.get("Retry-After", "1")), 5.0))
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body=None, expect: int | tuple = (200, 201)):
        response = self.http.post(f"{self.url}/api/v1/{path}", json=body, timeout=60)
        expected = (expect,) if isinstance(expect, int) else expect
        assert response.status_code in expected, response.text
        return response.json()

    def submit(self, config_path: Path, model_dir: Path, **overrides) -> dict:
        """Create an experiment from a YAML file with top-level overrides; return its first trial."""
        import yaml

        from headway.cli import pack_model_definition

        config = yaml.safe_load(config_path.read_text())
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
        model = pack_model_definition(model_dir, 32 * 1024 * 1024)
        experiment = self.post("experiments/", {"config": config, "model_definition": b64(model)})
        return self.get(f"experiments/{experiment['id']}/trials/")["results"][0]

    def trial(self, trial_id: int) -> dict:
        return self.get(f"trials/{trial_id}/")

    def wait_trial(self, trial_id: int, predicate, what: str, timeout: float = 240) -> dict:
        def check():
            trial = self.trial(trial_id)
            return trial if predicate(trial) else None

        return wait_for(check, timeout, what)

    def logs(self, trial_id: int) -> list[str]:
        return [
            line["message"] for line in self.get(f"trials/{trial_id}/logs/", limit=10000)["results"]
        ]

    def series(self, trial_id: int, group: str, name: str) -> tuple[list[int], list]:
        (series,) = self.get(f"trials/{trial_id}/metrics/", group=group, name=name, max_points=0)[
            "series"
        ]
        return series["steps"], series["values"]

    def checkpoint_state(self, uuid: str) -> dict:
        """``state-dict.pth`` of a checkpoint, downloaded over REST."""
        import torch

        response = self.http.get(
            f"{self.url}/api/v1/checkpoints/{uuid}/download",
            params={"path": "state-dict.pth"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        return torch.load(io.BytesIO(response.content), weights_only=False)
