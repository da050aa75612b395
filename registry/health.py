"""Component health: is every part the cluster needs working now?

``health_report()`` checks, in one call (a few seconds at most, whatever hangs):

- ``database``: ``SELECT 1`` on the default connection;
- ``broker``: Redis answers ``PING`` (``REDIS_URL``), or the embedded filesystem broker's
  folders exist and are writable;
- ``master_worker``: the master's Celery worker (with its embedded beat) completed a lost-run
  reaper pass recently: the pass writes a ``ComponentBeat`` row (``record_beat``), stale after
  ``master_worker_limit()`` seconds;
- ``storage:<name>`` for each storage location (``registry.storage_locations.locations``):
  shared_fs: the root folder exists and a marker file can be written (and is removed) there;
  s3: ``HeadBucket`` answers.

Each check that may block on the network or a file system (broker, storage) runs in a daemon
thread and is reported down after ``CHECK_TIMEOUT_SECONDS`` (a hung NFS mount or a black-holed
endpoint must not hang the endpoint). The idea of one report of named components with a status
each follows Kubernetes' ``/readyz?verbose`` and Spring Boot's health groups.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from config.storage_locations import StorageLocation
from registry.models import ComponentBeat
from registry.storage_locations import locations

MASTER_WORKER = "master_worker"
# Seconds a blocking check (broker, storage) may take before it is reported down.
CHECK_TIMEOUT_SECONDS = 3.0
# A reaper pass may be late by a few intervals (a long pass, a worker restart) before the worker
# is reported down, but never by less than a minute.
_MIN_BEAT_LIMIT_SECONDS = 60.0
_BEAT_LIMIT_INTERVALS = 6

OK, DOWN, UNKNOWN = "ok", "down", "unknown"


@dataclasses.dataclass(frozen=True)
class ComponentHealth:
    """One component's state.

    Attributes:
        name (str): ``database``, ``broker``, ``master_worker`` or ``storage:<location>``.
        status (str): ``ok``, ``down``, or ``unknown`` (it could not be checked because another
            component, the database, is down).
        detail (str): what was checked and what was found, for an operator.
        checked_at (datetime): when the check ended.
        last_beat_at (datetime | None): ``master_worker`` only: its last reaper pass.
    """

    name: str
    status: str
    detail: str
    checked_at: datetime
    last_beat_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def as_dict(self) -> dict[str, object]:
        """The JSON shape of ``GET /api/v1/health/`` (docs/rest-api.md)."""
        out: dict[str, object] = {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "checked_at": self.checked_at.isoformat(),
        }
        if self.name == MASTER_WORKER:
            out["last_beat_at"] = self.last_beat_at.isoformat() if self.last_beat_at else None
        return out


@dataclasses.dataclass(frozen=True)
class HealthReport:
    """Every component's health, in a fixed order (database, broker, master worker, storage
    locations by name)."""

    components: list[ComponentHealth]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.components)

    @property
    def down(self) -> list[str]:
        """Names of the components that are not ok."""
        return [c.name for c in self.components if not c.ok]

    def as_dict(self) -> dict[str, object]:
        return {
            "status": OK if self.ok else DOWN,
            "down": self.down,
            "components": [c.as_dict() for c in self.components],
        }


def _result(name: str, status: str, detail: str, **extra: object) -> ComponentHealth:
    return ComponentHealth(name, status, detail, timezone.now(), **extra)  # type: ignore[arg-type]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def check_database() -> ComponentHealth:
    """``SELECT 1`` on the default database."""
    vendor = connection.vendor
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return _result("database", DOWN, f"{vendor}: {_first_line(exc)}")
    return _result("database", OK, f"{vendor} answered SELECT 1")


def _redis_address(url: str) -> str:
    """``host:port/db`` of a Redis URL, without its credentials (for details and logs)."""
    parts = urlsplit(url)
    return f"{parts.hostname or '?'}:{parts.port or 6379}{parts.path or ''}"


def _check_redis(url: str) -> ComponentHealth:
    import redis

    where = _redis_address(url)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=CHECK_TIMEOUT_SECONDS, socket_timeout=CHECK_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return _result("broker", DOWN, f"redis at {where}: {_first_line(exc)}")
    finally:
        client.close()
    return _result("broker", OK, f"redis at {where} answered PING")


def _check_filesystem_broker(options: dict[str, object]) -> ComponentHealth:
    folders = sorted(
        {str(options[k]) for k in ("data_folder_in", "processed_folder") if k in options}
    )
    for folder in folders:
        if not os.path.isdir(folder):
            return _result("broker", DOWN, f"filesystem broker: {folder} is missing")
        if not os.access(folder, os.W_OK | os.X_OK):
            return _result("broker", DOWN, f"filesystem broker: {folder} is not writable")
    return _result("broker", OK, f"filesystem broker at {', '.join(folders)}")


def check_broker() -> ComponentHealth:
    """Redis ``PING`` when ``REDIS_URL`` is set, else the filesystem broker's folders."""
    if settings.REDIS_URL:
        return _check_redis(settings.REDIS_URL)
    return _check_filesystem_broker(dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS))


def master_worker_limit() -> float:
    """Seconds after which a master worker with no reaper pass is reported down: six reaper
    intervals (``HEADWAY_REAPER_INTERVAL_SECONDS``), at least 60."""
    return max(_MIN_BEAT_LIMIT_SECONDS, _BEAT_LIMIT_INTERVALS * reaper_interval())


def reaper_interval() -> float:
    """Seconds between the master worker's reaper passes (``HEADWAY_REAPER_INTERVAL_SECONDS``,
    as its beat schedule holds it)."""
    schedule: Any = settings.CELERY_BEAT_SCHEDULE["reap-lost-runs"]["schedule"]
    return float(schedule)


def record_beat(name: str = MASTER_WORKER, at: datetime | None = None) -> None:
    """Store ``at`` (default now) as component ``name``'s last beat (one UPDATE; the first beat
    inserts the row, a racing insert is ignored)."""
    at = at or timezone.now()
    if not ComponentBeat.objects.filter(name=name).update(beat_at=at):
        ComponentBeat.objects.bulk_create(
            [ComponentBeat(name=name, beat_at=at)], ignore_conflicts=True
        )


def last_beat(name: str = MASTER_WORKER) -> datetime | None:
    """Component ``name``'s last beat, None when it never beat.

    Raises:
        django.db.DatabaseError: the database cannot answer.
    """
    return ComponentBeat.objects.filter(name=name).values_list("beat_at", flat=True).first()


def check_master_worker(database_ok: bool = True) -> ComponentHealth:
    """The age of the master worker's last reaper pass against ``master_worker_limit()``;
    ``unknown`` when the database is down (``database_ok`` False, or the read fails)."""
    if not database_ok:
        return _result(MASTER_WORKER, UNKNOWN, "cannot read its last beat: the database is down")
    try:
        beat = last_beat()
    except DatabaseError as exc:
        return _result(MASTER_WORKER, UNKNOWN, f"cannot read its last beat: {_first_line(exc)}")
    hint = "is the master worker (celery -A config worker -B, `serve`, `master`) running?"
    if beat is None:
        return _result(MASTER_WORKER, DOWN, f"no reaper pass recorded yet: {hint}")
    age = max((timezone.now() - beat).total_seconds(), 0.0)
    limit = master_worker_limit()
    if age > limit:
        detail = f"last reaper pass {age:.0f} s ago (limit {limit:g} s): {hint}"
        return _result(MASTER_WORKER, DOWN, detail, last_beat_at=beat)
    return _result(MASTER_WORKER, OK, f"last reaper pass {age:.0f} s ago", last_beat_at=beat)


def _check_shared_fs(location: StorageLocation, embedded: bool) -> ComponentHealth:
    name = f"storage:{location.name}"
    root = Path(str(location.host_path))
    if embedded:
        # The embedded default is Headway's own folder under HEADWAY_VAR_DIR (the SDK creates it
        # at the first checkpoint). An admin's root is a mount: never created here, else a
        # missing mount would silently fill the local disk under the mount point.
        root.mkdir(parents=True, exist_ok=True)
    if not root.is_dir():
        return _result(name, DOWN, f"shared_fs {root}: the folder is missing")
    try:
        with tempfile.NamedTemporaryFile(dir=root, prefix=".headway-health-") as marker:
            marker.write(b"ok")
            marker.flush()
    except OSError as exc:
        return _result(name, DOWN, f"shared_fs {root}: cannot write a marker: {_first_line(exc)}")
    return _result(name, OK, f"shared_fs {root}: marker written and removed")


_s3_clients: dict[tuple[str | None, str | None], object] = {}
_s3_lock = threading.Lock()


def _s3_client(endpoint_url: str | None, region: str | None):
    """A boto3 client with short timeouts and no retries (a check, not a transfer), kept per
    endpoint and region (boto3 clients are thread-safe; building one takes tens of ms)."""
    import boto3
    import botocore.config

    key = (endpoint_url, region)
    with _s3_lock:
        if key not in _s3_clients:
            _s3_clients[key] = boto3.client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region,
                config=botocore.config.Config(
                    connect_timeout=CHECK_TIMEOUT_SECONDS,
                    read_timeout=CHECK_TIMEOUT_SECONDS,
                    retries={"max_attempts": 1, "mode": "standard"},
                    signature_version="s3v4",
                ),
            )
        return _s3_clients[key]


def _check_s3(location: StorageLocation) -> ComponentHealth:
    import botocore.exceptions

    name = f"storage:{location.name}"
    endpoint = location.endpoint_url or os.environ.get("HEADWAY_S3_ENDPOINT_URL") or None
    where = f"s3 bucket {location.bucket} at {endpoint or 'AWS'}"
    try:
        _s3_client(endpoint, location.region).head_bucket(Bucket=location.bucket)
    except botocore.exceptions.ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "?")
        return _result(
            name, DOWN, f"{where}: HeadBucket answered {code} {error.get('Message', '')}".rstrip()
        )
    except (botocore.exceptions.BotoCoreError, OSError) as exc:
        return _result(name, DOWN, f"{where}: {_first_line(exc)}")
    return _result(name, OK, f"{where}: HeadBucket answered")


def check_storage(location: StorageLocation, embedded: bool = False) -> ComponentHealth:
    """The storage location's check (shared_fs marker, s3 HeadBucket); ``embedded``: the
    embedded default location, whose folder is created when missing."""
    if location.type == "shared_fs":
        return _check_shared_fs(location, embedded)
    return _check_s3(location)


def _bounded(name: str, check: Callable[[], ComponentHealth]) -> Callable[[], ComponentHealth]:
    """Start ``check`` in a daemon thread now; the returned function waits for its answer until
    ``CHECK_TIMEOUT_SECONDS`` (plus a second for the check's own timeouts) after the start, and
    then reports the component down. A hung check's thread is left to finish on its own."""
    answers: queue.Queue[ComponentHealth] = queue.Queue(maxsize=1)
    deadline = time.monotonic() + CHECK_TIMEOUT_SECONDS + 1.0

    def run() -> None:
        try:
            answers.put(check())
        except Exception as exc:  # an unexpected failure is this component's, not the report's
            answers.put(_result(name, DOWN, _first_line(exc)))

    threading.Thread(target=run, name=f"health-{name}", daemon=True).start()

    def wait() -> ComponentHealth:
        try:
            return answers.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            limit = CHECK_TIMEOUT_SECONDS + 1.0
            return _result(name, DOWN, f"no answer within {limit:g} s")

    return wait


def health_report() -> HealthReport:
    """Check every component (module docstring); blocking checks run in parallel, so the call
    takes about the slowest check, at most ``CHECK_TIMEOUT_SECONDS`` + 1 s plus the database's."""
    found = locations()
    embedded = getattr(settings, "HEADWAY_STORAGE_LOCATIONS", None) is None
    pending = [_bounded("broker", check_broker)]
    for loc_name in sorted(found.locations):
        location = found.locations[loc_name]
        pending.append(_bounded(f"storage:{loc_name}", partial(check_storage, location, embedded)))
    database = check_database()
    master = check_master_worker(database.ok)
    broker, *storage = (wait() for wait in pending)
    return HealthReport([database, broker, master, *storage])
