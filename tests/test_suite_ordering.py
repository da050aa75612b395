"""tests/ordering.py: the no-database tests run heaviest module first, each module whole."""

from __future__ import annotations

import pytest

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
