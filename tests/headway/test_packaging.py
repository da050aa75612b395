"""The package split (#26): ``pip install headway`` is the SDK, the CLI and the trial
environment; ``headway[server]`` adds the web stack, which ``make install`` always takes."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.helpers import REPO

SERVER_ONLY = {"django", "djangorestframework", "celery", "gunicorn", "psycopg", "plotly"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_base_install_has_no_web_stack_and_the_server_extra_has_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = _names(project["dependencies"])
    server = _names(project["optional-dependencies"]["server"])
    assert not base & SERVER_ONLY, base & SERVER_ONLY
    assert server >= SERVER_ONLY
    assert {"torch", "requests", "pydantic", "boto3"} <= base  # what the SDK imports
    assert not base & server  # each requirement has one home


def test_make_install_and_the_image_install_the_server_extra() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"pip install -q -e '\.\[server,[^']*\]'", makefile), makefile
    assert 'pip install ".[server]"' in (REPO / "Dockerfile").read_text()


BLOCKER = """
import importlib.abc, sys

SERVER = {"django", "rest_framework", "celery", "kombu", "redis", "plotly", "psycopg",
          "gunicorn", "whitenoise", "drf_spectacular", "django_filters", "werkzeug", "nh3",
          "markdown", "csp", "axes", "dj_database_url"}


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SERVER:
            raise ModuleNotFoundError(f"No module named {name!r} (not in a base install)")
        return None


sys.meta_path.insert(0, Absent())
import headway.cli.main, headway.core, headway.pytorch, headway.client, headway.launch
print("imported")
"""


def test_the_sdk_and_cli_import_with_no_server_package_present() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
