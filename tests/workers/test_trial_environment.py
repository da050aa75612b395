"""The trial environment offers the packages Determined's default images give its examples:
``ruamel.yaml`` next to PyYAML, declared so a fresh install has it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers import REPO, requirement_names
from workers.launch import command


def test_ruamel_yaml_is_a_declared_dependency() -> None:
    """In pyproject.toml's dependencies, which a fresh ``make install`` installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {"ruamel.yaml", "pyyaml", "torch"} <= requirement_names(project["dependencies"])


def test_a_trial_entrypoint_imports_ruamel_yaml(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "from ruamel.yaml import YAML\nprint(YAML(typ='safe').load('lr: 0.1'))\n"
    )
    done = subprocess.run(
        command("python probe.py", is_trial_class=False, code_dir=tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(Path(sys.executable).parent)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'lr': 0.1}"
