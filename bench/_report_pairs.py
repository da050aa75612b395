"""One metric report and batched ingest, this tree beside an earlier commit, in interleaved rounds.

``bench/metrics_ingest.py`` measures the baseline commit first and this tree after it; on a
shared 2-core machine the load moves between the two halves (wall times 3-10x apart). Here both
servers run at once, each on its own fresh database and behind gunicorn as deployed
(``config/gunicorn.py``: gthread workers): the earlier commit's code from a temporary git
worktree, this tree's from the repository. Each round sends a block of one-point reports, then
a block of 1,000-point batches, to one server and then to the other, the order swapped every
round, so a burst of someone else's load hits both sides alike.

The client is the SDK's own call: ``headway.client.Session.request("POST", ..., data=...)``
with the compact JSON body its reporter sends. Per side: the p50 and p90 of the one-point
round trip, batched points/s, ``GET /healthz`` p50 (the floor every request pays), and the
server's CPU time (psutil: the gunicorn master and workers) per report and per point, which
waiting for a core does not inflate. Per round: the ratio this tree / baseline of the round's
single-report p50 and of its points/s; the figure is the median ratio and its range.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from _baseline import worktree
from _server import REPO, Backend, Server, postgres_recreate, single_file_model_definition
from _tiny import pick

ROUNDS = pick(12, 2)
SINGLE_PER_ROUND = pick(50, 10)
BATCHES_PER_ROUND, METRICS, REPORTS_PER_BATCH = pick(10, 2), 10, 100
HEALTHZ_N = pick(200, 20)
CONFIG = """\
name: report-pairs-bench
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
"""


def _body(reports: list[dict[str, Any]]) -> bytes:
    """A body as the SDK's reporter sends it: compact JSON bytes."""
    return json.dumps({"reports": reports}, separators=(",", ":")).encode()


class Side:
    """One server (a source tree, its own database) and its SDK session (context manager)."""

    def __init__(self, name: str, repo: Path, backend: Backend) -> None:
        self.name, self.repo, self.backend = name, repo, backend
        self.server = Server(backend, "serve", repo=repo)
        self.single: list[float] = []
        self.rounds: list[dict[str, float]] = []
        self.cpu_single_s = self.cpu_batched_s = 0.0
        self.next_step = {"single": 1, "batched": 1}

    def __enter__(self) -> Side:
        from headway.client import Session

        self.backend.manage("migrate", "--noinput", "-v", "0", repo=self.repo)
        token = self.backend.manage("headway_token", "bench", "--create", repo=self.repo)
        self.server.start()
        self.session = Session(self.server.url, token=token.strip().splitlines()[-1])
        self.trials = {"single": self._trial(), "batched": self._trial()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def _trial(self) -> int:
        model = single_file_model_definition("train.py", "print('bench')\n")
        exp = self.session.post("experiments/", {"config": CONFIG, "model_definition": model})
        trials = self.session.get(f"experiments/{exp['id']}/trials/")
        return (trials["results"] if isinstance(trials, dict) else trials)[0]["id"]

    def cpu_s(self) -> float:
        """CPU seconds (user + system) used so far by the server and its workers."""
        return self.server.cpu_seconds()

    def _post(self, kind: str, body: bytes) -> float:
        headers = {"Content-Type": "application/json"}
        t0 = time.perf_counter()
        self.session.request(
            "POST", f"trials/{self.trials[kind]}/metrics/", data=body, headers=headers
        )
        return time.perf_counter() - t0

    def run_round(self) -> None:
        """One block of one-point reports, then one of 1,000-point batches."""
        times = []
        cpu0 = self.cpu_s()
        for _ in range(SINGLE_PER_ROUND):
            step = self.next_step["single"]
            report = {"group": "training", "steps_completed": step, "metrics": {"loss": 0.5}}
            times.append(self._post("single", _body([report])))
            self.next_step["single"] += 1
        cpu1 = self.cpu_s()
        batched_s = 0.0
        for _ in range(BATCHES_PER_ROUND):
            start = self.next_step["batched"]
            reports = [
                {
                    "group": "training",
                    "steps_completed": s,
                    "metrics": {f"m{i}": 1.0 / (s + i) for i in range(METRICS)},
                }
                for s in range(start, start + REPORTS_PER_BATCH)
            ]
            batched_s += self._post("batched", _body(reports))
            self.next_step["batched"] += REPORTS_PER_BATCH
        self.cpu_single_s += cpu1 - cpu0
        self.cpu_batched_s += self.cpu_s() - cpu1
        self.single += times
        points = BATCHES_PER_ROUND * REPORTS_PER_BATCH * METRICS
        self.rounds.append(
            {"single_p50_ms": statistics.median(times) * 1e3, "points_per_s": points / batched_s}
        )

    def reset(self) -> None:
        """Forget what was measured so far (after a warm-up round)."""
        self.single, self.rounds = [], []
        self.cpu_single_s = self.cpu_batched_s = 0.0

    def healthz_p50_ms(self) -> float:
        times = []
        for _ in range(HEALTHZ_N):
            t0 = time.perf_counter()
            self.session.request("GET", f"{self.server.url}/healthz")
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    def figures(self) -> dict[str, float]:
        """This side's totals over every round."""
        n_single = len(self.single)
        n_points = len(self.rounds) * BATCHES_PER_ROUND * REPORTS_PER_BATCH * METRICS
        ordered = sorted(self.single)
        return {
            "single_p50_ms": statistics.median(self.single) * 1e3,
            "single_p90_ms": ordered[int(0.9 * (n_single - 1))] * 1e3,
            "single_server_cpu_ms": self.cpu_single_s * 1e3 / n_single,
            "points_per_s": statistics.median(r["points_per_s"] for r in self.rounds),
            "batched_server_cpu_us_per_point": self.cpu_batched_s * 1e6 / n_points,
        }


def _backends(label: str, postgres_url: str) -> tuple[Backend, Backend] | None:
    """Two fresh databases of one kind (baseline, this tree); None when PostgreSQL is down."""
    if label == "sqlite":
        return Backend.sqlite(), Backend.sqlite()
    made: list[Backend] = []
    for suffix in ("_pairs_base", "_pairs"):
        url = postgres_url + suffix
        problem = postgres_recreate(url)
        if problem is not None:
            print(f"note: pairs on PostgreSQL skipped ({problem})")
            for backend in made:
                backend.cleanup()
            return None
        made.append(Backend.postgres(url))
    return made[0], made[1]


def measure_pairs(ref: str | None, labels: list[str], postgres_url: str) -> dict[str, Any]:
    """Interleaved rounds of this tree against ``ref`` (None: this tree on both sides, the tiny
    mode's walk through the code) for each backend label; the JSON figures, keys prefixed
    ``{label}_pairs_``."""
    tree, remove = worktree(ref) if ref else (REPO, lambda: None)
    out: dict[str, Any] = {}
    try:
        for label in labels:
            made = _backends(label, postgres_url)
            if made is None:
                continue
            try:
                out.update(_measure_backend(label, tree, made))
            finally:
                for backend in made:
                    backend.cleanup()
    finally:
        remove()
    return out


def _measure_backend(label: str, tree: Path, made: tuple[Backend, Backend]) -> dict[str, Any]:
    print(f"pairs on {label}: baseline and this tree behind gunicorn, interleaved ...", flush=True)
    with Side("baseline", tree, made[0]) as base, Side("this tree", REPO, made[1]) as this:
        floors = {side.name: side.healthz_p50_ms() for side in (base, this)}
        for side in (base, this):  # warm-up: a fresh server's first requests are slower
            side.run_round()
            side.reset()
        for i in range(ROUNDS):
            for side in (base, this) if i % 2 == 0 else (this, base):
                side.run_round()
        single_ratios = [
            t["single_p50_ms"] / b["single_p50_ms"]
            for t, b in zip(this.rounds, base.rounds, strict=True)
        ]
        batch_ratios = [
            t["points_per_s"] / b["points_per_s"]
            for t, b in zip(this.rounds, base.rounds, strict=True)
        ]
        figures = {"baseline": base.figures(), "this": this.figures()}
    prefix = f"{label}_pairs_"
    out: dict[str, Any] = {
        f"{prefix}load_avg_1m": round(os.getloadavg()[0], 2),
        f"{prefix}healthz_p50_ms": round(floors["this tree"], 3),
        f"{prefix}baseline_healthz_p50_ms": round(floors["baseline"], 3),
        f"{prefix}single_p50_ratio": round(statistics.median(single_ratios), 3),
        f"{prefix}single_p50_ratio_range": [
            round(min(single_ratios), 3),
            round(max(single_ratios), 3),
        ],
        f"{prefix}points_per_s_ratio": round(statistics.median(batch_ratios), 3),
        f"{prefix}points_per_s_ratio_range": [
            round(min(batch_ratios), 3),
            round(max(batch_ratios), 3),
        ],
    }
    for which, values in figures.items():
        for key, value in values.items():
            name = f"{prefix}{key}" if which == "this" else f"{prefix}baseline_{key}"
            out[name] = round(value, 3)
    _print(label, out)
    return out


def _print(label: str, out: dict[str, Any]) -> None:
    p = f"{label}_pairs_"
    print(
        f"  {'':10s} {'single p50':>10s} {'p90':>7s} {'cpu ms':>7s} {'points/s':>10s} {'cpu us/pt':>9s}"
    )
    for side, q in (("baseline", f"{p}baseline_"), ("this tree", p)):
        print(
            f"  {side:10s} {out[q + 'single_p50_ms']:>10.2f} {out[q + 'single_p90_ms']:>7.2f}"
            f" {out[q + 'single_server_cpu_ms']:>7.2f} {out[q + 'points_per_s']:>10,.0f}"
            f" {out[q + 'batched_server_cpu_us_per_point']:>9.2f}"
        )
    print(
        f"  ratio this/baseline: single p50 {out[p + 'single_p50_ratio']}"
        f" (range {out[p + 'single_p50_ratio_range']}), points/s {out[p + 'points_per_s_ratio']}"
        f" (range {out[p + 'points_per_s_ratio_range']}); load {out[p + 'load_avg_1m']}"
    )
