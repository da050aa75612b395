"""``headway tensorboard EXPERIMENT_ID``: TensorBoard files come from each trial's latest
checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from headway.cli.main import main
from tests.headway.cli.fakes import FakeResponse, FakeSession


def _routes(fake: type[FakeSession]) -> None:
    fake.routes[("GET", "experiments/3/")] = {"id": 3, "name": "x", "state": "COMPLETED"}
    fake.routes[("GET", "experiments/3/trials/")] = [
        {"id": 7, "experiment_id": 3, "state": "COMPLETED"},
        {"id": 8, "experiment_id": 3, "state": "COMPLETED"},
    ]
    resources = {"state-dict.pth": 10, "tensorboard/events.out.tfevents.1.h.1": 4}
    fake.routes[("GET", "trials/7/checkpoints/")] = [
        {
            "uuid": "old",
            "trial_id": 7,
            "steps_completed": 2,
            "state": "COMPLETED",
            "resources": resources,
        },
        {
            "uuid": "new",
            "trial_id": 7,
            "steps_completed": 4,
            "state": "COMPLETED",
            "resources": resources,
        },
    ]
    fake.routes[("GET", "trials/8/checkpoints/")] = []

    def download(params: dict[str, Any]) -> FakeResponse:
        assert params == {"path": "tensorboard/events.out.tfevents.1.h.1"}
        return FakeResponse(b"evts")

    fake.routes[("STREAM", "checkpoints/new/download")] = download


def test_it_downloads_each_trials_latest_event_files(
    fake: type[FakeSession], tmp_path: Path, capsys: Any
) -> None:
    _routes(fake)
    out = tmp_path / "tb"
    assert main(["tensorboard", "3", "-o", str(out), "--print-logdir-only"]) == 0
    assert capsys.readouterr().out.strip() == str(out.resolve())
    assert (out / "trial_7" / "events.out.tfevents.1.h.1").read_bytes() == b"evts"
    assert not (out / "trial_8").exists()
    assert ("STREAM", "checkpoints/old/download") not in [c[:2] for c in fake.calls]


def test_it_says_when_there_is_nothing_to_show(
    fake: type[FakeSession], tmp_path: Path, capsys: Any
) -> None:
    _routes(fake)
    fake.routes[("GET", "trials/7/checkpoints/")] = []
    assert main(["tensorboard", "3", "-o", str(tmp_path), "--print-logdir-only"]) == 1
    assert "no TensorBoard files" in capsys.readouterr().err
