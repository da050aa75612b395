"""The ``headway`` command starts without the modules only some commands need.

Every command imports ``headway.cli.main`` (its parser names every command), so what that import
loads is paid by ``headway checkpoint download`` and ``headway --help`` alike: the config models
(pydantic, YAML), the wire models, tqdm and the archive packer load only in the commands that use
them.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "yaml", "tqdm", "headway.expconf", "headway.archive", "headway.client._wire")


def _loaded_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_importing_the_command_line_loads_none_of_the_heavy_modules():
    loaded = _loaded_after("import headway.cli.main")
    assert [name for name in HEAVY if name in loaded] == []


def test_the_wire_models_load_at_first_use_and_are_the_same_classes_by_either_name():
    loaded = _loaded_after(
        "from headway.client import wire, _wire\n"
        "assert wire.HostInfo is _wire.HostInfo and wire.Claim is _wire.Claim"
    )
    assert "pydantic" in loaded


def test_threads_reading_the_wire_models_first_at_once_all_get_them():
    # Before Python 3.12 importlib.util.LazyLoader let a second thread see a half-run module.
    loaded = _loaded_after(
        "import threading\n"
        "from headway.client import wire\n"
        "start, got = threading.Barrier(8), []\n"
        "def read():\n"
        "    start.wait()\n"
        "    got.append(wire.ShareStatusList)\n"
        "threads = [threading.Thread(target=read) for _ in range(8)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "assert len(got) == 8 and len(set(got)) == 1, got"
    )
    assert "headway.client._wire" in loaded


def test_a_config_error_still_exits_2_naming_the_file(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("searcher: [not, a, mapping]\n")
    (tmp_path / "model").mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "headway.cli",
            "experiment",
            "create",
            str(config),
            str(tmp_path / "model"),
        ],
        capture_output=True,
        text=True,
        env={"HEADWAY_MASTER": "http://127.0.0.1:9", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "bad.yaml" in result.stderr and "searcher" in result.stderr
