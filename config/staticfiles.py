"""The static files storage: WhiteNoise's hashed + compressed storage that degrades gracefully.

``collectstatic`` writes each file under a content-hashed name with ``.gz`` (and ``.br`` when the
``brotli`` package is installed) copies, which WhiteNoise's middleware serves with an immutable
one-year ``Cache-Control`` (https://whitenoise.readthedocs.io/en/stable/django.html). Django's
manifest storage fails every ``{% static %}`` (so every page) for a file that was never collected;
here such a file keeps its plain name instead, which WhiteNoise serves from the finders
(``WHITENOISE_USE_FINDERS``) with its short max-age, so ``manage.py runserver``/``serve`` work
before the first ``collectstatic`` and with files added since.
"""

from __future__ import annotations

# whitenoise ships no type information (the lead may move it to pyproject's mypy overrides).
from whitenoise.storage import CompressedManifestStaticFilesStorage  # type: ignore[import-untyped]


class CompressedManifestStorage(CompressedManifestStaticFilesStorage):
    """Hashed + compressed names from ``collectstatic``'s manifest, else the plain name.

    Raises nothing for an uncollected file (the plain name is returned); a file missing from
    the source folders too is reported by the browser's 404, as with the plain storage.
    """

    # A name missing from the manifest is hashed from STATIC_ROOT if collected there...
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        """The name ``{% static name %}`` links: hashed when collected, ``name`` otherwise."""
        try:
            return super().stored_name(name)
        except ValueError:
            # ...and not collected at all: keep the plain name (served from the finders).
            return name
