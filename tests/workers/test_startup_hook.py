"""``startup-hook.sh`` at the top of a model definition runs before the entrypoint (Determined)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from workers.launch import command


def run(code_dir: Path, entrypoint: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(entrypoint, is_trial_class=False, code_dir=code_dir),
        cwd=code_dir,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_hook_is_sourced_first_and_its_exports_reach_the_entrypoint(tmp_path: Path) -> None:
    (tmp_path / "startup-hook.sh").write_text("export GREETING=from-hook\necho hook ran\n")
    done = run(tmp_path, 'echo "entrypoint sees $GREETING"')
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["hook ran", "entrypoint sees from-hook"]


def test_a_failing_hook_stops_the_trial_before_the_entrypoint(tmp_path: Path) -> None:
    (tmp_path / "startup-hook.sh").write_text("false\necho not reached\n")
    done = run(tmp_path, "echo entrypoint ran")
    assert done.returncode != 0 and "entrypoint ran" not in done.stdout


def test_without_a_hook_the_command_is_unchanged(tmp_path: Path) -> None:
    assert command("python train.py", False, code_dir=tmp_path) == [
        "/bin/sh",
        "-c",
        "python train.py",
    ]
