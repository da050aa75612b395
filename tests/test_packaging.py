"""The package split (#26): ``pip install headway`` is the SDK, the CLI and the trial
environment; ``headway[server]`` adds the web stack, which ``make install`` always takes."""

from __future__ import annotations

import re
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
