"""examples/lightning/train.py runs as shipped, locally (no cluster): it trains, validates and
stores its ModelCheckpoint files as (local) Headway checkpoints."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("lightning")

from tests.helpers import REPO

pytestmark = pytest.mark.slow


def test_the_example_trains_locally(tmp_path: pathlib.Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "lightning" / "train.py"), "--max-epochs", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "validation metrics at step 45" in done.stderr  # 1,437 images / 32 a batch
    (stored,) = [p for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()]
    metadata = json.loads((stored / "metadata.json").read_text())
    assert metadata["steps_completed"] == 45
    assert metadata["lightning"]["monitor"] == "val_loss"
    assert metadata["lightning"]["hparams"] == {"lr": 0.01, "hidden": 64}
    assert (stored / metadata["lightning"]["file"]).is_file()
