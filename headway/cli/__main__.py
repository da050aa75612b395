"""``python -m headway.cli``: same as the ``headway`` console script."""

import sys

from headway.cli.main import main

sys.exit(main())
