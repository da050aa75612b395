"""tests/ordering.py: the no-database tests run heaviest module first, each module whole, and
an ``xdist_group`` runs on one worker under ``--dist loadgroup``."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.ordering import heaviest_modules_first, needs_database


class FakeItem:
    """What the ordering reads of a pytest item: its node id, markers and fixtures."""

    def __init__(self, nodeid: str, *, slow: bool = False, fixtures: tuple[str, ...] = ()):
        self.nodeid = nodeid
        self.fixturenames = list(fixtures)
        self._marks = {"slow": pytest.mark.slow.mark} if slow else {}

    def get_closest_marker(self, name: str):
        return self._marks.get(name)

    def __repr__(self) -> str:
        return self.nodeid


def test_modules_with_more_slow_tests_come_first_and_stay_whole_and_in_order():
    items = [
        FakeItem("a.py::one"),
        FakeItem("b.py::one", slow=True),
        FakeItem("a.py::two"),
        FakeItem("c.py::one", slow=True),
        FakeItem("c.py::two", slow=True),
        FakeItem("b.py::two"),
    ]
    ordered = heaviest_modules_first(items)
    assert [i.nodeid for i in ordered] == [
        "c.py::one", "c.py::two", "b.py::one", "b.py::two", "a.py::one", "a.py::two",
    ]  # fmt: skip


def test_database_fixtures_count_as_needing_the_database():
    assert needs_database(FakeItem("x.py::t", fixtures=("live_server",)))
    assert needs_database(FakeItem("x.py::t", fixtures=("db", "tmp_path")))
    assert not needs_database(FakeItem("x.py::t", fixtures=("tmp_path",)))


GROUPED = """
import pytest


@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    assert i >= 0


@pytest.mark.parametrize("i", range(6))
def test_free(i):
    assert i >= 0
"""


PLUGINS = ("-p", "tests.ordering", "-p", "no:cacheprovider", "-p", "no:django")
PYTEST_OPTIONS = (*PLUGINS, "-n", "2", "--dist", "loadgroup")


def test_loadgroup_keeps_an_xdist_group_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "test_grouped.py", *PYTEST_OPTIONS],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # "[gw1] [ 50%] PASSED test_grouped.py::test_grouped[3]@shared"
    ran = re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", done.stdout)
    grouped = [(worker, test) for worker, test in ran if "::test_grouped[" in test]
    assert len(grouped) == 6 and len(ran) == 12, done.stdout
    assert all(test.endswith("@shared") for _, test in grouped), grouped
    assert len({worker for worker, _ in grouped}) == 1, grouped
