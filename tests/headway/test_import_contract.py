"""The import contract of ``make lint``: the SDK (headway/) never imports Django or the server.

The contract lives in ``[tool.importlinter]`` of pyproject.toml. These tests run ``lint-imports``
with that very contract against a tiny fake tree holding an offending import (it must fail and
name the import), and against the real tree (it must pass).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO


def _lint_imports() -> str:
    # Next to the interpreter running the tests (the venv's bin/), else on PATH.
    script = Path(sys.executable).with_name("lint-imports")
    if script.exists():
        return str(script)
    found = shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is not installed (pip install -e '.[dev]')")
    return found


def _real_config() -> dict:
    with (REPO / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["tool"]["importlinter"]


def _ini_value(value: object) -> str:
    if isinstance(value, list):
        return "".join(f"\n    {item}" for item in value)
    return str(value)


def _write_ini(config: dict, path: Path) -> None:
    """Write pyproject's ``[tool.importlinter]`` table as an INI config for ``--config``."""
    lines = ["[importlinter]"]
    lines += [f"{key} = {_ini_value(v)}" for key, v in config.items() if key != "contracts"]
    for index, contract in enumerate(config["contracts"]):
        lines += ["", f"[importlinter:contract:{contract.get('id', index)}]"]
        lines += [f"{key} = {_ini_value(v)}" for key, v in contract.items() if key != "id"]
    path.write_text("\n".join(lines) + "\n")


def _run(config: Path, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [_lint_imports(), "--config", str(config), "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fake_packages(root: Path, config: dict) -> None:
    """Empty packages for every root package of the contract and every source, forbidden or
    layer sub-package of one (``headway.cli``, ``registry.scheduling``) with its parents:
    lint-imports refuses a contract naming a module that is absent."""
    roots = set(config["root_packages"])
    names = set(roots)
    for contract in config["contracts"]:
        named = (
            contract.get("source_modules", [])
            + contract.get("forbidden_modules", [])
            + contract.get("layers", [])
        )
        names |= {m for m in named if m.split(".")[0] in roots}
    # Every parent package too (``registry.pools`` of ``registry.pools.slurm``).
    names |= {".".join(n.split(".")[:i]) for n in names for i in range(1, n.count(".") + 1)}
    for name in names:
        folder = root.joinpath(*name.split("."))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")


@pytest.mark.parametrize(
    ("statement", "shown"),
    [
        ("import django.db", "headway.core._leak -> django"),
        ("from registry.lifecycle import pause", "headway.core._leak -> registry.lifecycle"),
    ],
)
def test_contract_rejects_sdk_importing_the_server(tmp_path: Path, statement: str, shown: str):
    config = _real_config()
    # A fake tree with every root package of the real contract; the fake ``headway`` comes first
    # on PYTHONPATH, so it shadows the installed SDK.
    _fake_packages(tmp_path, config)
    (tmp_path / "registry" / "lifecycle" / "__init__.py").write_text("def pause():\n    pass\n")
    (tmp_path / "headway" / "core").mkdir(exist_ok=True)
    (tmp_path / "headway" / "core" / "__init__.py").write_text("")
    (tmp_path / "headway" / "core" / "_leak.py").write_text(f'"""Leaks."""\n\n{statement}\n')
    ini = tmp_path / "contract.ini"
    _write_ini(config, ini)

    result = _run(ini, cwd=tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    assert "BROKEN" in result.stdout, result.stdout + result.stderr
    assert shown in result.stdout, result.stdout


def test_contract_holds_on_the_real_tree(tmp_path: Path):
    ini = tmp_path / "contract.ini"
    _write_ini(_real_config(), ini)

    result = _run(ini, cwd=REPO, pythonpath=REPO)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_contract_rejects_the_dashboard_importing_the_cli(tmp_path: Path):
    # The dashboard reads hparam overrides with headway.expconf's parsers, not the CLI's.
    config = _real_config()
    _fake_packages(tmp_path, config)
    (tmp_path / "headway" / "cli" / "__init__.py").write_text("def parse():\n    pass\n")
    (tmp_path / "dashboard" / "forms.py").write_text(
        '"""Leaks."""\n\nfrom headway.cli import parse\n'
    )
    ini = tmp_path / "contract.ini"
    _write_ini(config, ini)

    result = _run(ini, cwd=tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    assert "dashboard.forms -> headway.cli" in result.stdout, result.stdout


@pytest.mark.parametrize("source", ["scheduling", "checkpoints"])
def test_contract_rejects_placement_or_checkpoint_policy_importing_the_lifecycle(
    tmp_path: Path, source: str
):
    # The lifecycle calls registry.scheduling and registry.checkpoints, never the reverse,
    # so the import cycle that function-level imports used to hold cannot come back.
    config = _real_config()
    _fake_packages(tmp_path, config)
    (tmp_path / "registry" / "lifecycle" / "__init__.py").write_text("def pause():\n    pass\n")
    (tmp_path / "registry" / source / "_leak.py").write_text(
        '"""Leaks."""\n\nfrom registry.lifecycle import pause\n'
    )
    ini = tmp_path / "contract.ini"
    _write_ini(config, ini)

    result = _run(ini, cwd=tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    assert f"registry.{source}._leak -> registry.lifecycle" in result.stdout, result.stdout


def test_contract_rejects_the_sdk_importing_a_server_only_package(tmp_path: Path):
    # #26: `pip install headway` has none of `headway[server]`'s packages (e.g. plotly).
    config = _real_config()
    _fake_packages(tmp_path, config)
    (tmp_path / "headway" / "_leak.py").write_text('"""Leaks."""\n\nimport plotly\n')
    ini = tmp_path / "contract.ini"
    _write_ini(config, ini)

    result = _run(ini, cwd=tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    assert "headway._leak -> plotly" in result.stdout, result.stdout


def test_contract_rejects_the_sdk_importing_the_cli(tmp_path: Path):
    # headway.experimental used the CLI's private token and paging helpers; they are
    # headway.client's now, and only the CLI may import the CLI.
    config = _real_config()
    _fake_packages(tmp_path, config)
    (tmp_path / "headway" / "cli" / "_token.py").write_text("def save_token():\n    pass\n")
    (tmp_path / "headway" / "experimental" / "client.py").write_text(
        '"""Leaks."""\n\nfrom headway.cli._token import save_token\n'
    )
    ini = tmp_path / "contract.ini"
    _write_ini(config, ini)

    result = _run(ini, cwd=tmp_path, pythonpath=tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    assert "headway.experimental.client -> headway.cli._token" in result.stdout, result.stdout
