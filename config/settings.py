"""Headway settings, read from the environment with embedded defaults.

Embedded defaults (no servers needed): SQLite at ``var/headway.sqlite3``, checkpoints under
``var/checkpoints``, and Celery's filesystem broker under ``var/broker``. ``DATABASE_URL`` switches
to PostgreSQL, ``REDIS_URL`` to a Redis broker; see docs/configuration.md for every variable.
"""

import os
import re
import socket
from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from config.env import envbool, envint, envstr
from headway.archive import MAX_MODEL_DEF_BYTES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("HEADWAY_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = envstr("SECRET_KEY", "headway-embedded-insecure-key-change-me")
DEBUG = envbool("DEBUG", False)
ALLOWED_HOSTS = envstr("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver,[::1]").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in envstr("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    # Before staticfiles so that registry's runserver (TCP_NODELAY) overrides staticfiles' one.
    "registry",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    # Swagger UI and Redoc files served from our own static files (the schema UI works offline).
    "drf_spectacular_sidecar",
    "django_filters",
    "dashboard",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_SQLITE_URL = f"sqlite:///{VAR_DIR / 'headway.sqlite3'}"
# Persistent connections: opening one per request (conn_max_age=0) cost a connect + SQLite
# set-up (or a PostgreSQL backend start) and, on SQLite, a WAL checkpoint at close; see
# bench/metrics_ingest.py. Health checks drop a connection the database closed meanwhile.
DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", _SQLITE_URL),
        conn_max_age=envint("HEADWAY_DB_CONN_MAX_AGE", 600),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the worker writes; IMMEDIATE takes the write lock at
    # BEGIN so two writers queue on the busy timeout instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# plotly.js is served from the installed plotly package (no CDN, no vendored copy in git).
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("plotly", str(Path(plotly.__file__).parent / "package_data")),
]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# `collectstatic` (run by `make migrate`/`demo`/`serve`) writes content-hashed copies plus .gz
# (and .br with the brotli package) next to them; WhiteNoise serves hashed names with a
# one-year immutable Cache-Control and picks the compressed variant from Accept-Encoding.
# Under pytest (which sets PYTEST_VERSION) plain names are used: pytest-django's live_server
# serves /static/ from the finders, which know no hashed names, and a manifest left in var/ by
# `make demo` could be stale; tests/test_static_and_errors.py checks the manifest storage itself.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if os.environ.get("PYTEST_VERSION")
        else "config.staticfiles.CompressedManifestStorage"
    },
}
# Files not collected yet keep their plain names (config/staticfiles.py), served from the finders.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "registry.api.authentication.HeadwayTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["registry.api.permissions.IsUserOrTrialScoped"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "registry.api.errors.exception_handler",
    # Accept the NaN/Infinity literals Python's json emits in metric reports; responses never
    # hold them (non-finite values are stored and returned as strings).
    "STRICT_JSON": False,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Headway REST API",
    "DESCRIPTION": "Experiments, trials, metrics and checkpoints.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files instead of a CDN; no
    # call to the public validator.swagger.io either.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: a Redis broker when REDIS_URL is set, else the filesystem transport (no server needed).
REDIS_URL = envstr("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": envint("HEADWAY_VISIBILITY_TIMEOUT", 43200)
    }
else:
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_DEFAULT_QUEUE = envstr("HEADWAY_QUEUE", "headway")
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers run with an embedded beat (`worker -B`) that sends the lost-run reaper.
CELERY_BEAT_SCHEDULE = {
    "reap-lost-runs": {
        "task": "headway.reap_lost_runs",
        "schedule": float(envstr("HEADWAY_REAPER_INTERVAL_SECONDS", "30")),
        "options": {"queue": CELERY_TASK_DEFAULT_QUEUE, "expires": 60},
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Headway
HEADWAY_MASTER_URL = envstr(
    "HEADWAY_MASTER_URL", f"http://127.0.0.1:{envint('HEADWAY_PORT', 8000)}"
)
HEADWAY_CHECKPOINT_DIR = Path(
    envstr("HEADWAY_CHECKPOINT_DIR", str(VAR_DIR / "checkpoints"))
).resolve()
HEADWAY_WORK_DIR = Path(envstr("HEADWAY_WORK_DIR", str(VAR_DIR / "work"))).resolve()
# Lifetime of the S3 URLs that `checkpoints/{uuid}/download?redirect=presigned` redirects to.
HEADWAY_PRESIGNED_URL_SECONDS = envint("HEADWAY_PRESIGNED_URL_SECONDS", 300)
if not 1 <= HEADWAY_PRESIGNED_URL_SECONDS <= 7 * 24 * 3600:
    raise ImproperlyConfigured(
        "HEADWAY_PRESIGNED_URL_SECONDS must be 1 to 604800 (S3's limit), "
        f"got {HEADWAY_PRESIGNED_URL_SECONDS}"
    )
# Checkpoint GC removes stored checkpoints no registry row owns (a crashed upload) only once
# their newest file is this old, so an upload in progress is never taken (docs/checkpoints.md).
HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS = envint("HEADWAY_CHECKPOINT_ORPHAN_GRACE_SECONDS", 3600)
# Model definitions are stored with the experiment; the rule and its default live in
# headway.archive (shared with the CLI's packer).
HEADWAY_MAX_MODEL_DEF_BYTES = envint("HEADWAY_MAX_MODEL_DEF_BYTES", MAX_MODEL_DEF_BYTES)
# Kill: seconds between SIGTERM and SIGKILL of a trial's process group.
HEADWAY_KILL_GRACE_SECONDS = float(envstr("HEADWAY_KILL_GRACE_SECONDS", "10"))
# Workers heartbeat each run this often; a run whose worker has not heartbeated for the timeout
# is lost and its trial re-queued (the reaper runs every HEADWAY_REAPER_INTERVAL_SECONDS).
HEADWAY_HEARTBEAT_SECONDS = float(envstr("HEADWAY_HEARTBEAT_SECONDS", "10"))
HEADWAY_HEARTBEAT_TIMEOUT_SECONDS = envint("HEADWAY_HEARTBEAT_TIMEOUT_SECONDS", 60)
HEADWAY_LOG_FLUSH_SECONDS = float(envstr("HEADWAY_LOG_FLUSH_SECONDS", "0.5"))
# Torch/OMP threads per slot handed to trial processes (0 = leave torch's default).
HEADWAY_THREADS_PER_SLOT = envint("HEADWAY_THREADS_PER_SLOT", 0)
# Slot scheduling (docs/scheduling.md). A worker registers its host under this name (unique per
# worker; it is part of the host's Celery queue name, hence the character set).
HEADWAY_HOST_NAME = envstr(
    "HEADWAY_HOST_NAME", re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:200] or "host"
)
if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}", HEADWAY_HOST_NAME):
    raise ImproperlyConfigured(
        f"HEADWAY_HOST_NAME must be letters, digits, '.', '_' or '-', got {HEADWAY_HOST_NAME!r}"
    )
# Unset: the worker's slots are its GPUs (or one CPU slot without GPUs); set: that many CPU slots.
HEADWAY_SLOTS: int | None = envint("HEADWAY_SLOTS", 0) if envstr("HEADWAY_SLOTS", "") else None
if HEADWAY_SLOTS is not None and HEADWAY_SLOTS < 0:
    raise ImproperlyConfigured(f"HEADWAY_SLOTS must be 0 or more, got {HEADWAY_SLOTS}")
# Workers upsert their host this often (and run a placement pass); a host whose last heartbeat
# is older than the timeout holds no slots for placement.
HEADWAY_HOST_HEARTBEAT_SECONDS = float(envstr("HEADWAY_HOST_HEARTBEAT_SECONDS", "10"))
HEADWAY_HOST_TIMEOUT_SECONDS = float(envstr("HEADWAY_HOST_TIMEOUT_SECONDS", "60"))
# Trials over several hosts (docs/distributed.md): the address the other hosts reach this one
# at (the chief host serves torchrun's rendezvous store there), and how long the hosts of one
# run wait for each other to start before the run is given up as lost.
HEADWAY_HOST_ADDRESS = envstr("HEADWAY_HOST_ADDRESS", "127.0.0.1")
HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS = float(envstr("HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS", "300"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    "loggers": {"django.server": {"level": "WARNING"}},
}
