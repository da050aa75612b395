"""``python -m headway.launch.wrap_rank``: whole lines and the signals it passes on.

(Its prefix, line ends and rank variables: ``tests/headway/core/test_core_custom_launcher.py``.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.helpers import REPO

WRAP = [sys.executable, "-m", "headway.launch.wrap_rank", "2", "--", sys.executable, "-c"]

# Reports SIGUSR1's disposition, then waits for SIGTERM (which it reports too).
WAITS = """
import signal, sys, time
def on_term(signum, frame):
    print("got SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
ignored = signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
print("SIGUSR1 ignored" if ignored else "SIGUSR1 default", flush=True)
time.sleep(60)
"""


def start(code: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [*WRAP, code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def test_a_line_written_in_pieces_is_written_once_whole() -> None:
    code = (
        "import sys, time\n"
        "for piece in ('{\"a\": ', '1}', '\\n'):\n"
        "    sys.stdout.write(piece); sys.stdout.flush(); time.sleep(0.2)\n"
    )
    proc = start(code)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == '[rank=2] || {"a": 1}\n'


def test_sigterm_is_passed_on_and_an_ignored_sigusr1_stays_ignored_for_the_command() -> None:
    # As under ``headway.exec.guard --ignore-usr1`` in a Slurm job: SIGUSR1 arrives ignored.
    proc = start(WAITS, preexec_fn=lambda: signal.signal(signal.SIGUSR1, signal.SIG_IGN))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "[rank=2] || SIGUSR1 ignored\n"
    proc.send_signal(signal.SIGUSR1)  # ignored by the wrapper too: it keeps running
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert out == "[rank=2] || got SIGTERM\n" and proc.returncode == 0


def test_a_default_sigusr1_is_passed_on() -> None:
    proc = start(WAITS)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "[rank=2] || SIGUSR1 default\n"
    proc.send_signal(signal.SIGUSR1)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGUSR1  # the command's death by SIGUSR1
