"""Dashboard pages at scale: the entry point of ``bench/_dashboard.py`` (``make bench``).

``.venv/bin/python bench/dashboard.py --help``; a quick run: ``--steps 2000 --experiments 500``.
This file's name is the issue's; the code lives in ``_dashboard.py`` because a module named
``dashboard`` would shadow the Django app (and clash with it in mypy, which skips this file).
"""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# The repository before bench/, so that ``import dashboard`` finds the app, not this file.
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from _dashboard import main  # noqa: E402

if __name__ == "__main__":
    main()
