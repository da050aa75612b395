"""The suite's order: among the tests that need no database, the heaviest modules run first.

pytest-django runs the tests that need no database last (Django's own order). Those are the
SDK's many quick unit tests, but also the full-stack modules that start their own processes
(namespaced hosts, Slurm, a restarted web server), and in path order those came last: one
xdist worker spent minutes alone on them while the other had finished. Here, in that last
group only, modules with more ``slow`` tests move ahead of the quick ones, keeping each
module's tests together (module fixtures set up once) and in their own order. The database
groups before it keep pytest-django's order.

It also makes ``--dist loadgroup`` (the Makefile's) keep an ``xdist_group`` on one worker.
pytest-xdist 3.8 marks a grouped test by setting ``item._nodeid`` to ``<nodeid>@<group>``, which
pytest 9.2 no longer reads (an item's ``nodeid`` is built from its structured ``_id``), so the
scheduler saw no group and a worker that drew a Slurm module while the other held the shared
Slurm waited minutes on its lock.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from _pytest.nodeid import NodeId  # private: the structured id pytest 9.2 reads nodeid from

# The fixtures through which pytest-django gives a test the database (its reordering's test).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server"})


def needs_database(item: pytest.Item) -> bool:
    """Whether pytest-django counts ``item`` among the tests that use the database."""
    cls = getattr(item, "cls", None)
    if cls is not None:
        from django.test import TransactionTestCase

        if issubclass(cls, TransactionTestCase):
            return True
    if item.get_closest_marker("django_db") is not None:
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def heaviest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` grouped by module (in first-seen order), the modules with the most ``slow``
    tests first; a stable sort, so modules with as many keep their order."""
    by_module: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        by_module[item.nodeid.split("::", 1)[0]].append(item)
    modules = sorted(
        by_module.values(),
        key=lambda tests: -sum(t.get_closest_marker("slow") is not None for t in tests),
    )
    return [item for tests in modules for item in tests]


def carry_xdist_groups(items: list[pytest.Item]) -> None:
    """Give each item that pytest-xdist suffixed with its group (``item._nodeid``) that id as
    its ``nodeid``, which the controller's ``loadgroup`` scheduler splits at ``@``. Items without
    a suffix, and pytest versions where ``nodeid`` still reads ``_nodeid``, are left as they are."""
    for item in items:
        suffixed = item.__dict__.get("_nodeid")
        if (
            isinstance(suffixed, str)
            and suffixed != item.nodeid
            and isinstance(getattr(item, "_id", None), NodeId)
        ):
            item._id = NodeId.parse(suffixed)


@pytest.hookimpl(trylast=True)  # after pytest-django has put the no-database tests last
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    carry_xdist_groups(items)  # after pytest-xdist's own hook, which sets the suffix
    start = len(items)
    while start > 0 and not needs_database(items[start - 1]):
        start -= 1
    items[start:] = heaviest_modules_first(items[start:])
