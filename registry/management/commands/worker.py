"""``python manage.py worker``: a host agent on the master's own machine (or in the master's
Docker Compose project), with a host token issued here.

Steps: issue a fresh host token for ``HEADWAY_HOST_NAME`` (revoking a live one: the agent it
belonged to is being replaced), then replace this process with ``python -m workers`` (the host
agent: ``workers/__main__.py``) holding that token and the master's URL, and no database
settings or secret key in its environment. A GPU host elsewhere runs ``python -m workers``
itself with a token its admin issued (docs/deployment.md, "Adding a GPU host").
"""

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from registry.management.services import agent_environment, issue_local_host_token


class Command(BaseCommand):
    help = "Run a host agent on this machine with a freshly issued host token."

    def handle(self, **options):
        name = settings.HEADWAY_HOST_NAME
        token = issue_local_host_token(name)
        env = agent_environment(dict(os.environ), token)
        self.stdout.write(f"Host {name}: host token issued; starting its agent (python -m workers)")
        self.stdout.flush()
        os.chdir(settings.BASE_DIR)
        os.execve(sys.executable, [sys.executable, "-m", "workers"], env)
