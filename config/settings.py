"""Headway settings, read from the environment with embedded defaults.

Embedded defaults (no servers needed): SQLite at ``var/headway.sqlite3``, checkpoints under
``var/checkpoints``, and Celery's filesystem broker under ``var/broker``. ``DATABASE_URL`` switches
to PostgreSQL, ``REDIS_URL`` to a Redis broker; see docs/configuration.md for every variable.
What the host agents read too comes from ``headway.cluster_settings`` (``config.cluster.SHARED``).
"""

import os
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config import cluster
from config.broker import beat_schedule, broker_settings
from config.cluster import (  # noqa: F401  (settings Django reads by name)
    HEADWAY_DISPATCH_TIMEOUT_SECONDS,
    HEADWAY_HEARTBEAT_SECONDS,
    HEADWAY_HEARTBEAT_TIMEOUT_SECONDS,
    HEADWAY_HOST_ADDRESS,
    HEADWAY_HOST_HEARTBEAT_SECONDS,
    HEADWAY_HOST_MAX_FAILED_STARTS,
    HEADWAY_HOST_NAME,
    HEADWAY_HOST_TIMEOUT_SECONDS,
    HEADWAY_KILL_GRACE_SECONDS,
    HEADWAY_LEASE_MARGIN_SECONDS,
    HEADWAY_LEASE_SECONDS,
    HEADWAY_LOG_FLUSH_SECONDS,
    HEADWAY_LOST_BACKOFF_MAX_SECONDS,
    HEADWAY_LOST_BACKOFF_SECONDS,
    HEADWAY_OUTAGE_TOLERANCE_SECONDS,
    HEADWAY_RENDEZVOUS_TIMEOUT_SECONDS,
    HEADWAY_SLOTS,
    HEADWAY_THREADS_PER_SLOT,
    HEADWAY_UNMANAGED_HEARTBEAT_TIMEOUT_SECONDS,
)
from config.database import database_settings
from config.env import (
    embedded_secret_key,
    envbool,
    envfloat,
    envint,
    envstr,
    refuse_default_credentials,
)
from config.sso import oidc_settings
from config.storage_locations import load_storage_locations

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = cluster.SHARED.var_dir(BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DEBUG", False)
# SECRET_KEY signs sessions and CSRF tokens. Required on PostgreSQL (a deployment); the
# single-machine SQLite setup (and the tests) use a random key kept in $HEADWAY_VAR_DIR.
# Published defaults (a key from an example, MinIO's root account) stop start-up too.
_EMBEDDED = envstr("DATABASE_URL", "sqlite:").startswith("sqlite:") or bool(
    os.environ.get("PYTEST_VERSION")
)
SECRET_KEY = envstr("SECRET_KEY", "") or embedded_secret_key(VAR_DIR, allowed=_EMBEDDED)
refuse_default_credentials(SECRET_KEY, embedded=_EMBEDDED)
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
    # Single sign-on through an OpenID Connect provider (accounts/, config/sso.py).
    "accounts",
    # Admins' webhooks: events of the registry POSTed to their URLs (webhooks/, docs/webhooks.md).
    "webhooks",
    # Content-Security-Policy header (CONTENT_SECURITY_POLICY below) and login throttling.
    "csp",
    "axes",
]

MIDDLEWARE = [
    # First: counts every response, the 503s and 500s of the middleware below included (/metrics).
    "registry.prometheus.PrometheusMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A transient database error raised by a view is a 503 with Retry-After (registry/overload.py).
    "registry.overload.DatabaseUnavailableMiddleware",
    # Reads (dashboard pages, chart data) wait their turn so heartbeats never queue behind them
    # for a pooled connection (config/admission.py).
    "config.admission.AdmissionMiddleware",
    # JSON 413 for API bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (not Django's HTML 400).
    "registry.api.body_limit.BodyLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a locked-out login into a 429 page.
    "axes.middleware.AxesMiddleware",
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
# PostgreSQL through a bounded connection pool, SQLite with persistent connections; overload is
# answered 503 + Retry-After (config/database.py, registry/overload.py, docs/deployment.md).
DATABASES = {"default": database_settings(envstr("DATABASE_URL", _SQLITE_URL))}
# Reads at once per web worker process; unset: 4, fewer when the pool is smaller (heartbeats and
# writes keep 4 of its connections; config/admission.py).
HEADWAY_WEB_MAX_READS = (
    envint("HEADWAY_WEB_MAX_READS", 0) if os.environ.get("HEADWAY_WEB_MAX_READS") else None
)
# Metric reports at once per web worker process; unset: 8, fewer when the pool is smaller.
HEADWAY_WEB_MAX_REPORTS = (
    envint("HEADWAY_WEB_MAX_REPORTS", 0) if os.environ.get("HEADWAY_WEB_MAX_REPORTS") else None
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

# Login throttling (django-axes): after HEADWAY_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, logins for it from there answer 429 for HEADWAY_LOGIN_COOLOFF_MINUTES
# (dashboard and POST /api/v1/auth/login/). A correct password resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Single sign-on (config/sso.py): None unless HEADWAY_OIDC_ISSUER names a provider.
HEADWAY_OIDC = oidc_settings()
AXES_FAILURE_LIMIT = envint("HEADWAY_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=envint("HEADWAY_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False

# Behind a TLS-terminating proxy (HEADWAY_TLS): trust its X-Forwarded-Proto, send cookies over
# HTTPS only and ask browsers for HTTPS from now on (HSTS). The proxy must set that header.
HEADWAY_TLS = envbool("HEADWAY_TLS", False)
if HEADWAY_TLS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("HEADWAY_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("HEADWAY_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# No inline or third-party script anywhere (dashboard controls confirm through
# static/js/confirm.js); inline styles stay allowed (Plotly and progress bars set style
# attributes). Chromium checks every dashboard page against it (tests/config/test_production_settings.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# plotly.js is a strict partial bundle vendored in static/plotly/, built by vendor/plotly-bundle/
# (no CDN; docs/decisions/dashboard.md).
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# `collectstatic` (run by `make migrate`/`demo`/`serve`) writes content-hashed copies plus .gz
# (and .br with the brotli package) next to them; WhiteNoise serves hashed names with a
# one-year immutable Cache-Control and picks the compressed variant from Accept-Encoding.
# Under pytest (which sets PYTEST_VERSION) plain names are used: pytest-django's live_server
# serves /static/ from the finders, which know no hashed names, and a manifest left in var/ by
# `make demo` could be stale; tests/config/test_static_and_errors.py checks the manifest storage itself.
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
        # Host keys (hwh_...) first: authenticated as anonymous, so user routes answer 403.
        "registry.api.host_auth.HostTokenAuthentication",
        "registry.api.authentication.HeadwayTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["registry.api.permissions.IsUserOrTrialScoped"],
    "DEFAULT_PAGINATION_CLASS": "registry.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    # Documents every operation's JSON error answers (registry/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "registry.api.schema.HeadwayAutoSchema",
    # The REST API takes JSON only (the SDK, CLI and client send JSON): no form or multipart
    # parsing of bodies nobody sends; anything else is a 415. Bodies nested too deeply: a 400.
    "DEFAULT_PARSER_CLASSES": ["registry.api.parsers.BoundedJSONParser"],
    # OPTIONS answers 405: the schema (/api/v1/schema/) describes the API, and DRF's metadata
    # crashed (500) on viewsets without a serializer_class.
    "DEFAULT_METADATA_CLASS": None,
    "EXCEPTION_HANDLER": "registry.api.errors.exception_handler",
    # Accept the NaN/Infinity literals Python's json emits in metric reports; responses never
    # hold them (non-finite values are stored and returned as strings).
    "STRICT_JSON": False,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    # registry/path_converters.py: ids the database can hold, larger ones are a 404.
    "PATH_CONVERTER_OVERRIDES": {
        "db_id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    },
    "TITLE": "Headway REST API",
    "DESCRIPTION": "Experiments, trials, metrics and checkpoints.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and Swagger UI need a login (a user's token or dashboard session), like the
    # rest of the API; trial-run tokens are refused (a Low finding of the security review).
    "SERVE_PERMISSIONS": ["registry.api.permissions.IsUserOrTrialScoped"],
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files instead of a CDN; no
    # call to the public validator.swagger.io either.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Experiments and trials share one state set; named once (else "State71dEnum" and a warning).
    "ENUM_NAME_OVERRIDES": {
        "StateEnum": "registry.models.states.State",
        # Workspace roles: the bindings' three, and the two every user may be given.
        "WorkspaceRoleEnum": "registry.models.workspace.Role",
        "EveryoneRoleEnum": "registry.models.workspace.EVERYONE_ROLE_CHOICES",
    },
}

# Celery: a Redis broker when REDIS_URL is set, else the filesystem transport (no server needed).
REDIS_URL = envstr("REDIS_URL", "")
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = broker_settings(
    REDIS_URL, VAR_DIR, visibility_timeout=cluster.SHARED.HEADWAY_VISIBILITY_TIMEOUT
)
CELERY_TASK_DEFAULT_QUEUE = cluster.SHARED.HEADWAY_QUEUE
# Resource pools (registry/pools/): the admin's YAML file listing them ("" = only `default`),
# checked when Django starts (RegistryConfig.ready); the pool this process's worker host joins.
# HEADWAY_QUEUE stays the cluster's queue prefix (its namespace), not a pool.
HEADWAY_RESOURCE_POOLS = envstr("HEADWAY_RESOURCE_POOLS", "")
HEADWAY_RESOURCE_POOL = cluster.SHARED.HEADWAY_RESOURCE_POOL
# Hyperparameter importance fits (registry/hparam_importance.py) run in the master's worker,
# at most this many at once cluster-wide (the worker runs 2 threads: 1 leaves one for the
# reaper and checkpoint GC), each stopped after this many seconds.
HEADWAY_HPARAM_IMPORTANCE_MAX_FITS = envint("HEADWAY_HPARAM_IMPORTANCE_MAX_FITS", 1, minimum=1)
HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS = envint(
    "HEADWAY_HPARAM_IMPORTANCE_TIME_LIMIT_SECONDS", 60, minimum=1
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The master worker's beat sweeps every storage place for orphaned checkpoint files this often
# (registry.lifecycle._orphans; a pass lists each place once).
HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS = envint(
    "HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS", 3600, minimum=60
)
# Webhooks (webhooks/delivery.py): hosts on private or loopback addresses a webhook may target
# anyway (the HEADWAY_STORAGE_ENDPOINTS format: scheme://host[:port]); attempts per delivery;
# the first retry's delay in seconds (doubling each time, at most an hour); each request's
# timeout; how often the master worker's beat sends due deliveries whose task was lost.
HEADWAY_WEBHOOK_ENDPOINTS = [
    u.strip() for u in envstr("HEADWAY_WEBHOOK_ENDPOINTS", "").split(",") if u.strip()
]
HEADWAY_WEBHOOK_MAX_ATTEMPTS = envint("HEADWAY_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
HEADWAY_WEBHOOK_RETRY_SECONDS = envfloat("HEADWAY_WEBHOOK_RETRY_SECONDS", 30, minimum=0)
HEADWAY_WEBHOOK_TIMEOUT_SECONDS = envfloat("HEADWAY_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=0.1)
HEADWAY_WEBHOOK_SWEEP_SECONDS = envint("HEADWAY_WEBHOOK_SWEEP_SECONDS", 30, minimum=1)
# What the master worker's embedded beat (`worker -B`) sends (config/broker.py).
CELERY_BEAT_SCHEDULE = beat_schedule(
    CELERY_TASK_DEFAULT_QUEUE,
    orphan_sweep_seconds=HEADWAY_CHECKPOINT_ORPHAN_SWEEP_SECONDS,
    webhook_sweep_seconds=HEADWAY_WEBHOOK_SWEEP_SECONDS,
)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Headway
HEADWAY_MASTER_URL = envstr(
    "HEADWAY_MASTER_URL", f"http://127.0.0.1:{envint('HEADWAY_PORT', 8000)}"
)
HEADWAY_CHECKPOINT_DIR = cluster.SHARED.checkpoint_dir(VAR_DIR)
HEADWAY_WORK_DIR = cluster.SHARED.work_dir(VAR_DIR)
# Trial isolation (workers/isolation.py): the Unix user trials run as (the worker must be root),
# and names of worker variables passed to trials besides the built-in allow-list.
HEADWAY_TRIAL_USER = cluster.SHARED.HEADWAY_TRIAL_USER
HEADWAY_TRIAL_ENV = list(cluster.SHARED.HEADWAY_TRIAL_ENV)
# S3-compatible endpoints an experiment's checkpoint_storage.endpoint_url may name (the registry
# sends signed requests there: registry/storage_endpoints.py). Empty: AWS's endpoints only.
HEADWAY_STORAGE_ENDPOINTS = [
    u.strip() for u in envstr("HEADWAY_STORAGE_ENDPOINTS", "").split(",") if u.strip()
]
# Storage locations: the folders and buckets checkpoints may go to, named by the
# admin in the YAML file HEADWAY_STORAGE_LOCATIONS names (config/storage_locations.py). Unset:
# None, the embedded default, one shared_fs location `default` at HEADWAY_CHECKPOINT_DIR
# (registry/storage_locations.py reads that when asked, so tests may move the folder).
HEADWAY_STORAGE_LOCATIONS = (
    load_storage_locations(os.environ["HEADWAY_STORAGE_LOCATIONS"])
    if os.environ.get("HEADWAY_STORAGE_LOCATIONS")
    else None
)
# The bearer token Prometheus scrapes /metrics with (registry/api/views/prometheus.py); empty:
# only admins' tokens and sessions may read the metrics.
HEADWAY_METRICS_TOKEN = envstr("HEADWAY_METRICS_TOKEN", "")
if HEADWAY_METRICS_TOKEN and len(HEADWAY_METRICS_TOKEN) < 24:
    raise ImproperlyConfigured("HEADWAY_METRICS_TOKEN must be at least 24 characters long")
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
HEADWAY_MAX_MODEL_DEF_BYTES = cluster.SHARED.HEADWAY_MAX_MODEL_DEF_BYTES
# Untrusted input is bounded before it is parsed (docs/security.md, "Untrusted input: limits").
# Archives are checked in a child process with these wall-time and memory limits.
HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS = cluster.SHARED.HEADWAY_ARCHIVE_CHECK_TIMEOUT_SECONDS
HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES = cluster.SHARED.HEADWAY_ARCHIVE_CHECK_MEMORY_BYTES
HEADWAY_MAX_CONFIG_BYTES = envint("HEADWAY_MAX_CONFIG_BYTES", 256 * 1024)
HEADWAY_MAX_METRIC_NAMES_PER_REPORT = envint("HEADWAY_MAX_METRIC_NAMES_PER_REPORT", 1000)
HEADWAY_MAX_METRIC_SERIES_PER_TRIAL = envint("HEADWAY_MAX_METRIC_SERIES_PER_TRIAL", 10_000)
HEADWAY_MAX_LOG_LINE_CHARS = cluster.SHARED.HEADWAY_MAX_LOG_LINE_CHARS
HEADWAY_MAX_CHECKPOINT_FILES = envint("HEADWAY_MAX_CHECKPOINT_FILES", 50_000)
# A checkpoint's metadata as JSON, at registration and after additions (413 beyond): every
# checkpoint list and detail carries it (docs/decisions/security.md).
HEADWAY_MAX_CHECKPOINT_METADATA_BYTES = envint("HEADWAY_MAX_CHECKPOINT_METADATA_BYTES", 64 * 1024)
# One checkpoint file an unmanaged run sends through the master (streamed to storage).
HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES = envint("HEADWAY_MAX_CHECKPOINT_UPLOAD_BYTES", 10 * 1024**3)
# A request body may hold the base64 of the largest model definition plus the config; larger
# bodies are answered with a JSON 413 (registry.api.errors), not Django's HTML 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = (
    4 * -(-HEADWAY_MAX_MODEL_DEF_BYTES // 3) + 2 * HEADWAY_MAX_CONFIG_BYTES
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "INFO")},
    # django-axes logs every failed login at INFO; lock-outs are WARNING.
    "loggers": {"django.server": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
