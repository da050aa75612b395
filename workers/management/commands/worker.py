"""``python manage.py worker``: this host's Celery worker, sized to its slots (one per GPU host).

Steps: detect the host as the worker will (``HEADWAY_HOST_NAME``, ``HEADWAY_SLOTS`` or the
GPUs), print it, then replace this process with ``celery worker`` consuming the host's queue
and the pool queue, with one thread per slot plus one (``workers.services.worker_command``).
"""

import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from headway.launch._network import HostAddressError
from registry.pools import check_worker_pool
from workers import isolation
from workers.address import host_address
from workers.hosts import detect_host, host_queue
from workers.services import worker_command


class Command(BaseCommand):
    help = "Run this host's worker: registers its slots and runs the trials placed on it."

    def handle(self, **options):
        # A HEADWAY_TRIAL_USER this worker cannot switch to, or that cannot run its Python,
        # fails here, not at every trial.
        user = isolation.trial_user()
        if user is not None:
            isolation.check_trial_user_runs_python(user)
        spec = detect_host()
        try:  # a pool the admin's file does not list: its host would never get a run
            check_worker_pool(settings.HEADWAY_RESOURCE_POOL)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        address = _advertised_address()
        # One pooled connection per running trial, the reaper, the host heartbeat and beat's.
        pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
        if pool and pool["max_size"] < spec.slots + 3:
            raise CommandError(
                f"HEADWAY_DB_POOL_MAX_SIZE={pool['max_size']} is too small for this host's "
                f"{spec.slots} slot(s): its worker needs {spec.slots + 3} connections at most "
                "(one per running trial, the reaper, the host heartbeat, beat)"
            )
        command = worker_command(spec.slots + 1, host_name=spec.name)
        kind = "GPU" if spec.gpu else "CPU"
        self.stdout.write(
            f"Host {spec.name}: {spec.slots} {kind} slot(s) [{', '.join(spec.devices)}], "
            f"queue {host_queue(spec.name)}, address {address or 'unknown'}"
        )
        self.stdout.flush()
        os.chdir(settings.BASE_DIR)  # `celery -A config` imports the project from here
        os.execv(command[0], command)


def _advertised_address() -> str:
    """This host's advertised address (``workers.address``); a ``HEADWAY_HOST_ADDRESS`` that
    is not this host's stops the worker here, not at its first trial over several hosts.
    "" when it is unset and no route to the master exists yet (runs over several hosts fail
    to launch with that message; one-host runs do not need it)."""
    try:
        return host_address()
    except HostAddressError as exc:
        if settings.HEADWAY_HOST_ADDRESS:
            raise CommandError(str(exc)) from None
        return ""
