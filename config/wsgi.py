"""WSGI entry point (``gunicorn config.wsgi`` in production, ``runserver`` in the demo)."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# The URLconf (every view, serializer and schema module) is imported now rather than by the
# first request, and everything loaded so far goes to the collector's permanent generation
# (gc.freeze, Python docs: "gc — Garbage Collector interface"): a full collection in a worker
# then walks only what requests allocated. Unfrozen, the first one walked the whole of Django
# and stalled a 1,000-point metrics POST for 50-70 ms (docs/performance.md). Under gunicorn's
# preload_app the frozen objects' pages also stay shared between the forked workers.
get_resolver().url_patterns  # noqa: B018 (imports the URLconf)
gc.collect()
gc.freeze()
