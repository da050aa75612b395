"""The package split: ``pip install headway`` is the SDK, the CLI and the trial
environment; ``headway[server]`` adds the web stack, which ``make install`` always takes."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.helpers import REPO, requirement_names

SERVER_ONLY = {"django", "djangorestframework", "gunicorn", "psycopg", "plotly"}


def test_the_base_install_has_no_web_stack_and_the_server_extra_has_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = requirement_names(project["dependencies"])
    server = requirement_names(project["optional-dependencies"]["server"])
    assert not base & SERVER_ONLY, base & SERVER_ONLY
    assert server >= SERVER_ONLY
    assert {"torch", "requests", "pydantic", "boto3"} <= base  # what the SDK imports
    assert {"celery", "redis"} <= base  # what the host agent (workers/) imports: a GPU host
    assert not base & server  # each requirement has one home


def test_make_install_and_the_image_install_the_server_extra() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"pip install -q -e '\.\[server,[^']*\]'", makefile), makefile
    assert 'pip install ".[server]"' in (REPO / "Dockerfile").read_text()


# The SDK contract's forbidden packages arrive as arguments (one list: pyproject's).
BLOCKER = """
import importlib.abc, sys

SERVER = set(sys.argv[1:])


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SERVER:
            raise ModuleNotFoundError(f"No module named {name!r} (not in a base install)")
        return None


sys.meta_path.insert(0, Absent())
import headway.cli.main, headway.core, headway.pytorch, headway.client, headway.launch
print("imported")
"""


def _sdk_forbidden_packages() -> list[str]:
    """The top-level packages the SDK's import contract forbids (pyproject.toml)."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (sdk,) = [c for c in contracts["contracts"] if c.get("source_modules") == ["headway"]]
    return sorted({module.split(".")[0] for module in sdk["forbidden_modules"]})


def test_the_sdk_and_cli_import_with_no_server_package_present() -> None:
    blocked = _sdk_forbidden_packages()
    assert {"django", "celery", "plotly", "psycopg"} <= set(blocked)
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER, *blocked],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
