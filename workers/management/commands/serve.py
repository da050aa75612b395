"""``python manage.py serve``: the web server and one worker in the foreground (``make serve``)."""

from django.core.management.base import BaseCommand

from config.env import envint
from workers.services import Services


class Command(BaseCommand):
    help = "Run the web server and a worker until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=envint("HEADWAY_PORT", 8000))
        parser.add_argument("--slots", type=int, default=envint("HEADWAY_WORKER_SLOTS", 1))

    def handle(self, port, slots, **options):
        services = Services(port=port, concurrency=slots)
        services.start()
        self.stdout.write(f"Headway is serving on http://127.0.0.1:{port}/ (Ctrl-C to stop)")
        try:
            services.wait()
        finally:
            services.stop()
