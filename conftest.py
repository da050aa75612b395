"""The test suite's shared fixtures, for both trees: tests/ (unit and live-server tests) and
e2e_tests/ (full-stack). They live in tests/plugin.py and
tests/plugin_processes.py; a conftest.py below the root may not
register plugins, so this one does (docs/decisions/code-layout.md)."""

pytest_plugins = ["tests.plugin", "tests.plugin_processes", "tests.ordering"]
