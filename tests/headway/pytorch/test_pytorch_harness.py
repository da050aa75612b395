"""``python -m headway.exec.harness module:Class``: errors are one line with exit 1."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.slow  # each test starts a Python that imports torch

DIGITS = REPO / "examples" / "digits"


def _harness(cwd: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "headway.exec.harness", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture()
def model_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "plain.py").write_text("class NotATrial:\n    pass\n")
    return tmp_path


@pytest.mark.parametrize(
    ("entrypoint", "message"),
    [
        ("missing_module:Trial", "no module named 'missing_module'"),
        ("plain:Missing", "module 'plain' has no attribute 'Missing'"),
        ("plain:NotATrial", "NotATrial is not a subclass of headway.pytorch.PyTorchTrial"),
        ("plain", "must have the form package.module:TrialClass"),
    ],
)
def test_it_reports_entrypoint_mistakes_in_one_line(
    model_dir: pathlib.Path, entrypoint: str, message: str
) -> None:
    result = _harness(model_dir, entrypoint)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_it_rejects_a_search_space_in_a_local_config(model_dir: pathlib.Path) -> None:
    config = model_dir / "exp.yaml"
    config.write_text("hyperparameters:\n  lr: {type: log, minval: -3, maxval: -1, base: 10}\n")
    result = _harness(DIGITS, "model_def:DigitsTrial", "--config", str(config))
    assert result.returncode == 1
    assert "hyperparameters.lr is a search space" in result.stderr


def test_it_runs_a_trial_class_locally_from_its_directory(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "short.yaml"
    text = (DIGITS / "const.yaml").read_text().replace("epochs: 10", "batches: 3")
    config.write_text(text)
    work = tmp_path / "model"
    work.mkdir()
    (work / "model_def.py").write_text((DIGITS / "model_def.py").read_text())
    result = _harness(work, "model_def:DigitsTrial", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert "validation metrics at step 3" in result.stderr
    assert list((work / "checkpoints").glob("*/state-dict.pth"))
