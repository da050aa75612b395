"""What a trial process can reach of its worker: an environment allow-list and, optionally,
a separate Unix user (``HEADWAY_TRIAL_USER``).

Trial code is the experiment owner's code; the worker holds its host's secrets (the host
token, the broker URL, storage keys). So:

* the trial's environment is built from an allow-list (``trial_base_environment``): system and
  accelerator variables, the names in ``HEADWAY_TRIAL_ENV``, and the ``AWS_*`` variables only
  when the experiment's checkpoints go to S3 (the trial writes them there itself);
* with ``HEADWAY_TRIAL_USER`` the worker (which must run as root for that) starts each trial as
  that user, in a working directory only it can enter, and locks the worker's own files
  (``HEADWAY_VAR_DIR``: broker folders, logs; on the embedded setup the SQLite database too,
  which ``manage.py serve`` locks as well) away from it. Processes of another user cannot read the
  worker's ``/proc/<pid>/environ`` either.

docs/security.md ("Trial isolation") says what a trial can still reach.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workers.config import AgentConfigError, settings

# Variables of the worker's environment every trial keeps (harmless: where things are, locale,
# proxies, CA bundles). Everything else is dropped unless listed in HEADWAY_TRIAL_ENV.
ALLOWED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE",
        "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
        "https_proxy", "no_proxy", "HEADWAY_S3_ENDPOINT_URL", "HEADWAY_MASTER_OUTAGE_SECONDS",
        "HEADWAY_SYSTEM_METRICS",
    }
)  # fmt: skip
# Prefixes of accelerator, math-library and locale settings trials keep.
ALLOWED_PREFIXES = (
    "LC_", "CUDA_", "NCCL_", "NVIDIA_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "GLOO_", "TORCH_",
    "PYTORCH_",
)  # fmt: skip
# Passed only to trials of experiments whose checkpoint_storage is s3 (boto3's credential chain).
S3_PREFIX = "AWS_"
# Trials run as HEADWAY_TRIAL_USER write group-writable files (checkpoints the web server,
# in the same group, may delete); nothing is writable by others.
TRIAL_UMASK = 0o002


def trial_base_environment(
    environ: Mapping[str, str], *, storage_type: str, extra: Iterable[str] = ()
) -> dict[str, str]:
    """The part of the worker's environment ``environ`` a trial process inherits.

    Args:
        environ: the worker's environment (``os.environ``).
        storage_type: the experiment's ``checkpoint_storage.type`` (``shared_fs``, ``s3``);
            ``s3`` adds the ``AWS_*`` variables.
        extra: more names to pass as they are (``HEADWAY_TRIAL_ENV``).

    Returns:
        A new dict; the caller adds the ``HEADWAY_*`` variables of the run.
    """
    allowed = ALLOWED_NAMES | {name for name in extra if name}
    prefixes = ALLOWED_PREFIXES + ((S3_PREFIX,) if storage_type == "s3" else ())
    return {
        name: value
        for name, value in environ.items()
        if name in allowed or name.startswith(prefixes)
    }


@dataclass(frozen=True)
class TrialUser:
    """The Unix user trials run as: ``name``, ``uid``, ``gid`` and ``home`` (its home folder)."""

    name: str
    uid: int
    gid: int
    home: str


def trial_user() -> TrialUser | None:
    """The user of ``HEADWAY_TRIAL_USER`` (a name or a numeric uid), None when unset.

    Raises:
        AgentConfigError: the user does not exist, is the worker's own user, or the
            worker does not run as root (it could not switch to that user).
    """
    name = settings.HEADWAY_TRIAL_USER
    if not name:
        return None
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        raise AgentConfigError(f"HEADWAY_TRIAL_USER: no user {name!r} on this host") from None
    if entry.pw_uid == os.geteuid():
        raise AgentConfigError(
            f"HEADWAY_TRIAL_USER={name!r} is the worker's own user: trials would keep its rights"
        )
    if os.geteuid() != 0:
        raise AgentConfigError(
            f"HEADWAY_TRIAL_USER={name!r} needs the worker to run as root: it starts each trial "
            "as that user and gives it its working directory"
        )
    return TrialUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


PYTHON_CHECK_TIMEOUT_S = 120.0


def check_trial_user_runs_python(user: TrialUser, python: str | None = None) -> None:
    """Start ``python`` (default: the worker's own, which trials run under) as ``user`` with
    the environment a trial gets and import ``headway``, as every trial does first.

    Called when the worker starts: a ``HEADWAY_TRIAL_USER`` that cannot read the interpreter
    (e.g. a virtual environment under root's home) would otherwise fail every trial at start
    and burn its ``max_restarts``.

    Raises:
        AgentConfigError: naming ``HEADWAY_TRIAL_USER``, the interpreter and the error.
    """
    python = python or sys.executable
    env = trial_base_environment(os.environ, storage_type="", extra=settings.HEADWAY_TRIAL_ENV)
    env.update({"HOME": user.home, "USER": user.name, "LOGNAME": user.name})
    try:
        proc = subprocess.run(
            [python, "-c", "import headway"],
            user=user.uid,
            group=user.gid,
            extra_groups=[],
            cwd="/",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PYTHON_CHECK_TIMEOUT_S,
            check=False,
        )
    except OSError as exc:  # the exec itself was refused (no permission on the path)
        reason = f"{type(exc).__name__}: {exc}"
    except subprocess.TimeoutExpired:
        reason = f"it did not finish within {PYTHON_CHECK_TIMEOUT_S:g} s"
    else:
        if proc.returncode == 0:
            return
        lines = proc.stderr.strip().splitlines()
        reason = lines[-1] if lines else f"exit code {proc.returncode}"
    raise AgentConfigError(
        f"HEADWAY_TRIAL_USER={user.name!r} cannot run the worker's Python {python} "
        f"(`{python} -c 'import headway'` as that user: {reason}); every trial would fail. "
        "Install Python and Headway where that user can read and run them (the Docker "
        "image's /opt/venv is), or unset HEADWAY_TRIAL_USER"
    )


def lock_down_worker_files(user: TrialUser) -> None:
    """Make the worker's own files unreachable by ``user`` and the shared folders usable by it.

    ``HEADWAY_VAR_DIR`` can be crossed but not listed (0711) and everything in it loses its
    group and other permissions (the SQLite file, secret key, broker folders, logs, Celery beat
    schedule...), except the folders trials need: ``HEADWAY_WORK_DIR`` can be crossed (0711;
    each run's folder is handed over by ``hand_over``), ``HEADWAY_CHECKPOINT_DIR`` belongs to
    ``user`` and its group, setgid and group-writable (trials write ``shared_fs`` checkpoints
    there; a web server in that group deletes them). Idempotent.
    """
    var_dir = Path(settings.VAR_DIR).resolve()
    work_dir = Path(settings.HEADWAY_WORK_DIR).resolve()
    checkpoints = Path(settings.HEADWAY_CHECKPOINT_DIR).resolve()
    shared = (work_dir, checkpoints)
    var_dir.chmod(0o711)
    for entry in var_dir.iterdir():
        resolved = entry.resolve()
        if any(resolved == path or resolved in path.parents for path in shared):
            continue  # a shared folder, or one on the way to it
        if not entry.is_symlink():
            entry.chmod(entry.stat().st_mode & 0o700)
    work_dir.mkdir(parents=True, exist_ok=True)
    work_dir.chmod(0o711)
    checkpoints.mkdir(parents=True, exist_ok=True)
    os.chown(checkpoints, user.uid, user.gid)
    # Group-writable and setgid: a web server in the trial user's group can delete checkpoints
    # (trials write with umask 002, see ``TRIAL_UMASK``); others can only read them.
    checkpoints.chmod(0o2775)


def hand_over(run_dir: Path, user: TrialUser) -> None:
    """Give the run's folder (unpacked code, cluster info) to ``user``, closed to others (0700)."""
    for root, dirs, files in os.walk(run_dir):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), user.uid, user.gid, follow_symlinks=False)
    os.chown(run_dir, user.uid, user.gid)
    run_dir.chmod(0o700)
