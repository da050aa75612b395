"""docs/configuration.md against ``headway.cluster_settings.SharedSettings``: the defaults and
bounds of the variables the master and the hosts share are the ones the page gives."""

from __future__ import annotations

import os
import re

from headway.cluster_settings import SharedSettings
from tests.docs.test_docs_env_vars import DOC, READ_TABLE, doc_tables


def documented_defaults() -> dict[str, str]:
    """Variable -> the default cell (the second) of its row in a ``variable`` table."""
    defaults: dict[str, str] = {}
    for header, rows in doc_tables(DOC.read_text(encoding="utf-8")):
        if header != READ_TABLE:
            continue
        for first, *rest in rows:
            for name in re.findall(r"`([^`]+)`", first):
                defaults[name] = rest[0] if rest else ""
    return defaults


def test_the_shared_settings_defaults_are_the_documented_ones(monkeypatch):
    # headway.cluster_settings holds the defaults of what the master and the hosts both read;
    # each must appear (as `value`) in its row's default column. The host name is the machine's.
    for name in list(os.environ):
        if name.startswith("HEADWAY_"):
            monkeypatch.delenv(name)
    shared = SharedSettings.from_environment()
    defaults = documented_defaults()
    checked = 0
    for name, value in shared.model_dump().items():
        if name == "HEADWAY_HOST_NAME" or value in (None, "", []):
            continue
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        assert f"`{shown}`" in defaults[name], (name, shown, defaults[name])
        checked += 1
    assert checked >= 15


def test_the_shared_settings_bounds_are_the_documented_ones():
    # The page's "- above 0: `...`" lists name every bounded field of SharedSettings, and only them.
    from annotated_types import Ge, Gt

    text = DOC.read_text(encoding="utf-8")
    listed: dict[str, set[str]] = {}
    for bound in ("above 0", "0 or more", "1 or more"):
        item = re.search(rf"^- {bound}: (.*?)(?=^- |^$)", text, re.MULTILINE | re.DOTALL)
        assert item, f"docs/configuration.md has no '- {bound}:' list"
        listed[bound] = set(re.findall(r"`([A-Z0-9_]+)`", item.group(1)))
    actual: dict[str, set[str]] = {bound: set() for bound in listed}
    for name, field in SharedSettings.model_fields.items():
        for rule in field.metadata:
            if isinstance(rule, Gt) and rule.gt == 0:
                actual["above 0"].add(name)
            elif isinstance(rule, Ge) and rule.ge in (0, 1):
                actual[f"{rule.ge} or more"].add(name)
            elif isinstance(rule, Gt | Ge):
                raise AssertionError(f"{name}: a bound the page's lists do not cover: {rule}")
    assert listed == actual
