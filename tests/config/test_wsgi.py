"""The WSGI entry point loads the URLconf and freezes what is loaded (config/wsgi.py).

In a fresh interpreter, as gunicorn and runserver import it: afterwards the views are imported,
the collector's permanent generation holds Django, and a full collection walks far fewer objects
than there are alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import REPO

_PROBE = """
import gc, json, sys
import config.wsgi
alive = len(gc.get_objects())
print(json.dumps({
    "views_loaded": "registry.api.views.trials" in sys.modules,
    "frozen": gc.get_freeze_count(),
    "alive_unfrozen": alive,
    "status": config.wsgi.application.__class__.__name__,
}))
"""


def test_importing_the_wsgi_app_loads_the_urlconf_and_freezes_it(tmp_path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["views_loaded"] is True
    assert seen["status"] == "WSGIHandler"
    # Django, DRF and the views: tens of thousands of objects a collection no longer walks,
    # several times what is left for it.
    assert seen["frozen"] > 50_000
    assert seen["frozen"] > 3 * seen["alive_unfrozen"]
