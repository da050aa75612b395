"""make compose-check's checks of the running stack (run.sh starts the daemon and builds images).

    compose_check.py index WHEELS OUT        a PEP 503 index (OUT/<project>/index.html) of WHEELS
    compose_check.py run --project P ...     up, wait healthy, train the demo through nginx with
                                             web and worker restarts, verify; --result FILE (JSON)
    compose_check.py summary --phases ...    per-phase seconds and the one-line JSON summary

Everything goes through the published proxy port (http://127.0.0.1:8000) with the project's own
client (``headway.client.RegistryAPI``) and CLI (``.venv/bin/headway``); docker-compose and
Debian's docker client (``/usr/bin/docker``, ``DOCKER_HOST`` set by run.sh) only start, restart
and inspect containers. Phases and checks of ``run`` go to ``--result`` even when one fails.
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import itertools
import json
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import requests
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from headway.client import RegistryAPI  # noqa: E402  (the checkout, not an installed copy)

DOCKER = "/usr/bin/docker"  # Debian's client: an unrelated one may sit earlier on PATH
MASTER = "http://127.0.0.1:8000"  # docker-compose.yml publishes proxy's port 80 there
HEALTHY = ("postgres", "redis", "minio", "web1", "web2", "proxy", "worker")
ONE_SHOT = ("bucket", "migrate")
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


class CheckFailed(Exception):
    """A check of the stack failed; the message says which and what was seen."""


class Stack:
    """docker-compose project ``project`` of ``compose_file`` with ``env_file``; records
    ``phases`` (name -> seconds) and ``checks`` (dicts: name, ok, detail)."""

    def __init__(self, project: str, compose_file: Path, env_file: Path) -> None:
        self.project = project
        self.base = ["docker-compose", "-p", project, "-f", str(compose_file)]
        self.base += ["--env-file", str(env_file)]
        self.phases: dict[str, float] = {}
        self.checks: list[dict[str, Any]] = []

    def compose(self, *args: str, timeout: float = 600) -> str:
        """Run docker-compose ARGS; its stdout. Raises CheckFailed on a non-zero exit."""
        done = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise CheckFailed(f"docker-compose {' '.join(args)}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def states(self) -> dict[str, tuple[str, str, int]]:
        """Each service's container: (status, health or '', exit code), from one docker call."""
        ids = subprocess.run(
            [DOCKER, "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        form = (
            '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} '
            "{{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"
        )
        out = subprocess.run(
            [DOCKER, "inspect", "-f", form, *ids], capture_output=True, text=True, check=False
        ).stdout.splitlines() if ids else []  # fmt: skip
        states = {}
        for line in out:
            service, status, code, *health = line.split()
            states[service] = (status, health[0] if health else "", int(code))
        return states

    def wait_healthy(self, services: tuple[str, ...], timeout: float) -> None:
        """Until every SERVICE is healthy (and every one-shot step exited 0). Raises
        CheckFailed after ``timeout`` seconds naming the ones that are not."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.states()
            missing = ("missing", "", -1)
            bad = {s: st for s in services if (st := now.get(s, missing))[1] != "healthy"}
            bad |= {s: st for s in ONE_SHOT if (st := now.get(s, missing))[0::2] != ("exited", 0)}
            if not bad:
                return
            if any(st[0] == "exited" and s in ONE_SHOT and st[2] != 0 for s, st in bad.items()):
                raise CheckFailed(f"one-shot step failed: {bad}")
            if time.monotonic() > deadline:
                raise CheckFailed(f"not healthy after {timeout:.0f} s: {bad}")
            time.sleep(2)

    def check(self, name: str, ok: bool, detail: Any) -> None:
        """Record check NAME; raises CheckFailed when it failed."""
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        if not ok:
            raise CheckFailed(f"{name}: {detail}")

    def timed(self, phase: str, start: float) -> None:
        self.phases[phase] = round(self.phases.get(phase, 0.0) + time.monotonic() - start, 1)


# -- the stack ------------------------------------------------------------------------------------


def start_stack(stack: Stack) -> tuple[RegistryAPI, str]:
    """`up`, wait for every health check, issue an admin token; the API through nginx and it."""
    start = time.monotonic()
    print("== up_to_healthy", flush=True)
    stack.compose("up", "-d", "--no-build", timeout=900)
    stack.wait_healthy(HEALTHY, timeout=600)
    stack.timed("up_to_healthy", start)
    stack.check("all_healthy", True, f"{', '.join(HEALTHY)} healthy; bucket, migrate exited 0")
    token = stack.compose(
        "exec", "-T", "web1", "python", "manage.py", "headway_token", "compose-check",
        "--create", "--superuser",
    ).split()[-1]  # fmt: skip
    api = RegistryAPI(MASTER, token)
    health = api.session.get("/api/v1/health/")
    stack.check("health_through_proxy", isinstance(health, dict), health)
    return api, token


def train(stack: Stack, api: RegistryAPI, args: argparse.Namespace, token: str) -> dict[str, Any]:
    """Create the demo experiment (examples/digits/const.yaml, checkpoints in `minio`, trained
    for ``args.epochs``) with the CLI, restart web1, web2 and the worker while its trial runs,
    wait for the end; its trial."""
    example, work = args.example, args.work
    config = yaml.safe_load((example / "const.yaml").read_text())
    config["checkpoint_storage"] = {"location": "minio"}
    config["searcher"]["max_length"] = {"epochs": args.epochs}
    config_path = work / "digits-compose-check.yaml"
    config_path.write_text(yaml.safe_dump(config))
    start = time.monotonic()
    print("== training", flush=True)
    created = subprocess.run(
        [str(REPO / ".venv" / "bin" / "headway"), "--master", MASTER, "experiment", "create",
         str(config_path), str(example)],
        capture_output=True, text=True, check=False,
        env={"HEADWAY_TOKEN": token, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    match = re.search(r"Created experiment (\d+)", created.stdout)
    stack.check("experiment_created", match is not None, created.stdout.strip() or created.stderr)
    assert match is not None
    experiment_id = int(match.group(1))
    trial = wait_for(api, experiment_id, lambda t: t["steps_completed"] > 0, 600)
    print(f"  trial {trial['id']} running at step {trial['steps_completed']}", flush=True)
    restart_start = time.monotonic()
    # web1, then web2 once web1 serves again (one of them always answers behind nginx), then
    # the worker running the trial: each while the trial is still running.
    for service in ("web1", "web2", "worker"):
        trial = api.trial_get(trial["id"]).as_sent()
        detail = f"trial {trial['state']} at step {trial['steps_completed']}"
        stack.check(f"{service}_restarted_mid_trial", trial["state"] not in TERMINAL, detail)
        stack.compose("restart", "-t", "10", service)
        if service == "web1":
            stack.wait_healthy((service,), timeout=180)
    stack.timed("restarts", restart_start)
    trial = wait_for(api, experiment_id, lambda t: t["state"] in TERMINAL, 1200)
    experiment = api.experiment_get(experiment_id)
    stack.timed("training", start)
    stack.check("experiment_completed", experiment["state"] == "COMPLETED", experiment["state"])
    stack.check("trial_completed", trial["state"] == "COMPLETED", trial["state"])
    stack.check("restarts_charged", trial["restarts"] == 0, trial["restarts"])
    stack.wait_healthy(HEALTHY, timeout=180)
    trial["scheduling_unit"] = int(config.get("scheduling_unit", 100))
    return trial


def wait_for(api: RegistryAPI, experiment_id: int, done: Any, timeout: float) -> dict[str, Any]:
    """The experiment's (first) trial once ``done(trial)``; CheckFailed after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        trials = api.experiment_trials(experiment_id)
        if trials and done(trials[0].as_sent()):
            return trials[0].as_sent()
        if time.monotonic() > deadline:
            raise CheckFailed(f"experiment {experiment_id}: waited {timeout:.0f} s: {trials}")
        time.sleep(2)


def check_metrics(stack: Stack, api: RegistryAPI, trial: dict[str, Any], unit: int) -> None:
    """Every reported training and validation step stored once (REST, CSV), and training reports
    every ``unit`` batches (the scheduling unit) or sooner up to the trial's last step."""
    response = api.trial_metrics_csv(trial["id"])
    rows = list(csv.DictReader(io.StringIO(response.text)))
    response.close()
    steps: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        steps.setdefault((row["group"], row["name"]), []).append(int(row["steps_completed"]))
    duplicates = {
        f"{g}/{n}": len(s) - len(set(s)) for (g, n), s in steps.items() if len(s) != len(set(s))
    }
    stack.check(
        "metrics_stored_once", not duplicates, duplicates or f"{len(rows)} points, no duplicate"
    )
    training = {n: sorted(s) for (g, n), s in steps.items() if g == "training"}
    stack.check("training_metrics_present", bool(training), sorted(training))
    last = trial["steps_completed"]
    gaps = {name: series for name, series in training.items() if not _covered(series, last, unit)}
    series = next(iter(training.values()), [])
    between = [step for step in series if step % unit]
    stack.check(
        "every_training_step_once",
        not gaps,
        gaps
        or f"{len(training)} metric(s) x {len(series)} reports up to step {last}, each at most "
        f"{unit} batches after the one before (between units: {between or 'none'})",
    )


def _covered(series: list[int], last: int, unit: int) -> bool:
    """Reports (sorted, distinct steps) leave no batch unreported from the first to ``last``:
    each covers at most one scheduling unit (a report between two units, e.g. where a
    restarting worker stopped the trial, covers less)."""
    gaps = [b - a for a, b in itertools.pairwise([0, *series])]
    return bool(series) and series[-1] == last and all(0 < gap <= unit for gap in gaps)


def check_checkpoint(
    stack: Stack, api: RegistryAPI, trial: dict[str, Any], work: Path, token: str
) -> None:
    """The latest checkpoint as a tar (CLI, over REST) and one file by its presigned S3 link;
    both hold the bytes the registry lists."""
    start = time.monotonic()
    uuid = trial["latest_checkpoint"]
    checkpoint = api.checkpoint_get(uuid)
    resources = dict(checkpoint.resources)
    target = work / f"{uuid}.tar"
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "headway"), "--master", MASTER, "checkpoint", "download",
         uuid, "--format", "tar", "-o", str(target)],
        capture_output=True, text=True, check=False,
        env={"HEADWAY_TOKEN": token, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    with tarfile.open(target) as tar:
        members = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
        sizes = {rel: members[rel].size for rel in resources if rel in members}
        stack.check("checkpoint_tar", sizes == resources and bool(resources), sizes)
        rel = max(resources, key=lambda r: resources[r])
        extracted = tar.extractfile(members[rel])
        assert extracted is not None
        expected = extracted.read()
    route = api.path("checkpoint_download", "GET", uuid=uuid)
    answer = api.session.request(
        "GET", route, params={"path": rel, "redirect": "presigned"}, allow_redirects=False
    )
    location = answer.headers.get("Location", "")
    stack.check(
        "presigned_redirect", answer.status_code == 302 and ":9000/" in location, location[:80]
    )
    body = requests.get(location, timeout=60).content
    stack.check(
        "presigned_download", body == expected, f"{rel}: {len(body)} bytes, equal to the tar's"
    )
    stack.timed("downloads", start)


def run(args: argparse.Namespace) -> int:
    stack = Stack(args.project, args.compose_file, args.env_file)
    error = None
    try:
        api, token = start_stack(stack)
        trial = train(stack, api, args, token)
        check_metrics(stack, api, trial, trial["scheduling_unit"])
        check_checkpoint(stack, api, trial, args.work, token)
    except (
        CheckFailed,
        subprocess.TimeoutExpired,
        requests.RequestException,
        OSError,
        tarfile.TarError,
    ) as exc:
        error = str(exc)
        print(f"compose-check failed: {error}", file=sys.stderr)
    result = {"ok": error is None, "error": error, "phases": stack.phases, "checks": stack.checks}
    args.result.write_text(json.dumps(result))
    return 0 if error is None else 1


# -- the torch index and the summary --------------------------------------------------------------


def index(args: argparse.Namespace) -> int:
    """OUT/<normalized project>/index.html linking each wheel of WHEELS (PEP 503)."""
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(args.wheels.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        projects.setdefault(name, []).append(wheel)
    for name, wheels in projects.items():
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        links = []
        for wheel in wheels:
            (folder / wheel.name).unlink(missing_ok=True)
            (folder / wheel.name).symlink_to(wheel.resolve())
            links.append(f'<a href="{html.escape(wheel.name)}">{html.escape(wheel.name)}</a><br>')
        (folder / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        )
    listing = "".join(f'<a href="{n}/">{n}</a><br>\n' for n in sorted(projects))
    (args.out / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{listing}</body></html>\n")
    return 0


def summary(args: argparse.Namespace) -> int:
    """Print each phase's seconds and the JSON summary line (also to --out); 0 when all passed."""
    phases: dict[str, float] = {}
    for line in args.phases.read_text().splitlines() if args.phases.exists() else []:
        name, seconds = line.split("\t")
        phases[name] = float(seconds)
    result = json.loads(args.result.read_text()) if args.result.exists() else {}
    phases |= result.get("phases", {})
    checks = list(result.get("checks", []))
    for line in args.checks.read_text().splitlines() if args.checks.exists() else []:
        name, status, detail = line.split("\t", 2)
        checks.append({"name": f"host_{name}", "ok": status == "ok", "detail": detail})
    ok = bool(result.get("ok")) and not args.failed_phase and all(c["ok"] for c in checks)
    print("\ncompose-check phases (seconds):")
    order = ("daemon", "base_image", "standin_images", "project_image", "up_to_healthy",
             "training", "restarts", "downloads", "cleanup")  # fmt: skip
    for name in sorted(phases, key=lambda n: order.index(n) if n in order else len(order)):
        print(f"  {name:<16}{phases[name]:>8.1f}")
    line = json.dumps({
        "check": "compose-check", "ok": ok, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "failed_phase": args.failed_phase or None, "error": result.get("error"),
        "phases_s": phases, "checks": {c["name"]: c["ok"] for c in checks},
        "failed_checks": [c for c in checks if not c["ok"]],
    })  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(line + "\n")
    print(line)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("index")
    p.add_argument("wheels", type=Path)
    p.add_argument("out", type=Path)
    p.set_defaults(func=index)
    p = sub.add_parser("run")
    p.add_argument("--project", required=True)
    # The demo's 10 epochs end within a minute here, before three restarts (each container
    # restart and health check takes tens of seconds on a loaded machine) are done.
    p.add_argument("--epochs", type=int, default=40, help="max_length (default: 40 epochs)")
    for option in ("--compose-file", "--env-file", "--example", "--work", "--result"):
        p.add_argument(option, type=Path, required=True)
    p.set_defaults(func=run)
    p = sub.add_parser("summary")
    for option in ("--phases", "--checks", "--result", "--out"):
        p.add_argument(option, type=Path, required=True)
    p.add_argument("--failed-phase", default="")
    p.set_defaults(func=summary)
    args = parser.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
