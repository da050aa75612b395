"""``python manage.py demo [--once]``: serve Headway and train the digits example (``make demo``).

Steps: create the ``admin`` user (password from ``HEADWAY_ADMIN_PASSWORD`` or generated and
printed), start the web server and a worker, submit ``examples/digits/const.yaml`` with the
``headway`` CLI (``--follow`` shows progress), print a summary, then keep serving until Ctrl-C
(``--once``: stop and exit 0 only if the experiment COMPLETED).
"""

import os
import secrets
import subprocess
import sys

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from config.env import envint
from headway.client import RegistryAPI
from registry.management.services import Services


class Command(BaseCommand):
    help = "Serve Headway and run the digits example experiment."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="exit after the summary")
        parser.add_argument("--port", type=int, default=envint("HEADWAY_PORT", 8000))

    def _admin_token(self) -> str:
        User = get_user_model()
        password = os.environ.get("HEADWAY_ADMIN_PASSWORD") or secrets.token_urlsafe(9)
        user = User.objects.filter(username="admin").first()
        if user is None:
            user = User.objects.create_superuser("admin", email="", password=password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        shown = (
            "(from HEADWAY_ADMIN_PASSWORD)"
            if os.environ.get("HEADWAY_ADMIN_PASSWORD")
            else password
        )
        self.stdout.write(f"Dashboard login: admin / {shown}")
        token, _ = Token.objects.get_or_create(user=user)
        return token.key

    def handle(self, once, port, **options):
        token = self._admin_token()
        master = f"http://127.0.0.1:{port}"
        services = Services(port=port, log_dir=settings.VAR_DIR / "logs")
        self.stdout.write(
            f"Starting web + worker on {master} (logs in {settings.VAR_DIR / 'logs'}) ..."
        )
        services.start()
        try:
            example = settings.BASE_DIR / "examples" / "digits"
            cli = [sys.executable, "-m", "headway.cli.main", "--master", master, "experiment",
                   "create", str(example / "const.yaml"), str(example), "--follow"]  # fmt: skip
            env = dict(os.environ, HEADWAY_TOKEN=token)
            subprocess.run(cli, env=env, check=False)
            completed = self._summary(RegistryAPI(master, token), master)
            if once:
                if not completed:
                    raise CommandError("the example experiment did not complete")
                return
            self.stdout.write(f"Serving on {master}/ until Ctrl-C.")
            services.wait()
        finally:
            services.stop()

    def _summary(self, api: RegistryAPI, master: str) -> bool:
        experiment = next(iter(api.experiment_list()), None)  # newest first
        if experiment is None:
            raise CommandError("no experiment was created")
        trials = api.experiment_trials(experiment["id"])
        metric = experiment["searcher_metric"]
        self.stdout.write("")
        self.stdout.write(
            f"Experiment {experiment['id']} ({experiment['name']}): {experiment['state']}"
        )
        for trial in trials:
            validation = trial.summary_metrics.get("validation", {})
            final = validation.get(metric, {}).get("last")
            self.stdout.write(
                f"  trial {trial.id}: {trial.state}, {trial.steps_completed} batches, "
                f"final {metric} = {final if final is None else round(final, 4)}, "
                f"best = {trial.best_validation}"
            )
            self.stdout.write(f"  latest checkpoint: {trial.latest_checkpoint}")
            if trial.latest_checkpoint:
                self.stdout.write(
                    f"  download: {master}/api/v1/checkpoints/{trial.latest_checkpoint}/download"
                )
        self.stdout.write(f"Dashboard: {master}/experiments/{experiment['id']}/")
        self.stdout.write(
            f"REST API:  {master}/api/v1/experiments/{experiment['id']}/ (schema: {master}/api/v1/schema/ui/)"
        )
        return experiment["state"] == "COMPLETED"
