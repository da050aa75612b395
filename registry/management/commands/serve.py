"""``python manage.py serve``: the web server, the master's worker and this machine's host agent
in the foreground (``make serve``; ``registry.management.services``)."""

from django.core.management.base import BaseCommand

from config.env import envint, envstr
from registry.management.services import Services, exposure_warning


class Command(BaseCommand):
    help = "Run the web server and a worker until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=envint("HEADWAY_PORT", 8000))
        parser.add_argument("--slots", type=int, default=envint("HEADWAY_WORKER_SLOTS", 1))
        parser.add_argument(
            "--bind",
            default=envstr("HEADWAY_BIND", "127.0.0.1"),
            help="the web server's address (default: loopback only)",
        )

    def handle(self, port, slots, bind, **options):
        warning = exposure_warning(bind)
        if warning:
            self.stderr.write(warning)
            self.stderr.flush()
        services = Services(port=port, concurrency=slots, bind=bind)
        try:
            services.start()
        except KeyboardInterrupt:
            return  # stopped while starting: start() has stopped both children
        host = f"[{bind}]" if ":" in bind else bind
        self.stdout.write(f"Headway is serving on http://{host}:{port}/ (Ctrl-C to stop)")
        try:
            services.wait()
        finally:
            services.stop()
