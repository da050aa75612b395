"""The experiment page at search scale in headless Chromium: HTML size, DOM nodes, time to draw.

``.venv/bin/python bench/dashboard_scale.py [--rounds 3] [--baseline REF|none]`` (part of
``make bench``). On a fresh SQLite database a child process bulk-loads, through the ORM
(``Trial.objects.bulk_create``, ``registry.metrics._bulk.bulk_load``), two finished searches:

- ``t1000``: ``--big-trials`` (1,000) trials x 3 metrics x ``--steps`` (200) steps;
- ``t100``: ``--trials`` (100) trials x 5 metrics x ``--steps`` steps;

each trial with a ``best_validation`` and two hyperparameters (so the parallel coordinates are
drawn). ``manage.py serve``'s gunicorn (runserver without gunicorn) serves it and Chromium
(``tests/browser.py``'s binary and flags, 1400 x 3400 so every chart is on screen) logs in and
opens ``/experiments/<id>/`` ``--rounds`` times per page and mode: the page's own choice
(``auto``: lines of one colour merged into one trace) and ``?chart_mode=svg`` (one trace per
trial, the old drawing, as the same-run baseline). Per load: the HTML's bytes, the DOM's
element count once drawn, and the time from navigation start until every chart of the metric
board has drawn (the latest ``data-drawn-at`` its plots set when Plotly's draw resolved), the
median of the rounds.

The commit before the change (``--baseline``, default ``BASELINE_REF``; ``none`` skips it) is
measured in the same run from a temporary worktree with this script (``bench/_baseline.py``),
so the ratios compare the old page with the new on the same machine at the same time.
Targets on a quiet machine: t1000 drawn <= 3,000 ms, t100 <= 1,500 ms, t1000 HTML <= 200 KB.
The last line printed is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from _baseline import compare, run_baseline, wanted  # noqa: E402
from _server import REPO, Backend, Server, gunicorn_available  # noqa: E402
from _tiny import pick, tiny  # noqa: E402

# The commit before the experiment page paged its table and merged its lines.
BASELINE_REF = "61af050fec0d4147d772ac0b811651126a764216"
TARGETS = {"t1000_auto_ms": 3000.0, "t100_auto_ms": 1500.0, "t1000_auto_html_bytes": 200_000.0}
MODES = ("auto", "svg")
PASSWORD = "bench-pw"
VIEWPORT: Any = {"width": 1400, "height": 3400}  # playwright ViewportSize
# Once every chart of the metric board has drawn: the latest draw (ms since navigation start),
# traces and elements; null while any is missing or drawing. Works on the old page too (its
# plots set data-drawn-at the same way).
DRAWN_JS = """(charts) => {
  const plots = Array.from(document.querySelectorAll('#metrics-board .plot'));
  if (plots.length < charts || plots.some((p) => !p.dataset.drawnAt || p.dataset.rendering))
    return null;
  const board = document.getElementById('metrics-board');
  const fetched = (part) => performance.getEntriesByType('resource')
    .filter((e) => e.name.includes(part)).map((e) => [Math.round(e.startTime), Math.round(e.responseEnd)])[0] || null;
  return {
    data_at: Number(board.dataset.dataAt || 0),
    series: fetched('/metrics'),
    plotly: fetched('plotly'),
    dom_ready: Math.round(performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd),
    ms: Math.max(...plots.map((p) => Number(p.dataset.drawnAt))),
    traces: plots.reduce((n, p) => n + p.data.length, 0),
    elements: document.getElementsByTagName('*').length,
  };
}"""


def child(args: argparse.Namespace) -> None:
    """(child) Load both searches through the ORM; write ``{key: {experiment, charts}}``."""
    import django

    django.setup()
    import numpy as np
    from _fixtures import STARTED_AT, searcher_config
    from django.contrib.auth import get_user_model

    from registry.metrics._bulk import bulk_load
    from registry.models import Experiment, State, Trial

    user = get_user_model().objects.get(username="bench")
    user.set_password(PASSWORD)
    user.save()
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for key, trials, n_metrics in (("t1000", args.big_trials, 3), ("t100", args.trials, 5)):
        t0 = time.perf_counter()
        experiment = Experiment.objects.create(
            owner=user,
            name=key,
            config=searcher_config(args.steps),
            model_definition=b"",
            state=State.COMPLETED,
        )
        rows = Trial.objects.bulk_create(
            Trial(
                experiment=experiment,
                state=State.COMPLETED,
                steps_completed=args.steps,
                hparams={"lr": 10 ** -(1 + i % 4), "dropout": round(0.1 + 0.4 * (i % 7) / 6, 3)},
                best_validation=float(rng.uniform(0.05, 1.0)),
            )
            for i in range(trials)
        )
        steps = np.arange(1, args.steps + 1, dtype=np.int64)
        metrics = [f"m{k}" for k in range(n_metrics)]
        for i, trial in enumerate(rows):
            decay = np.exp(-steps / (args.steps / (2 + i % 5)))
            series = {m: decay * (1 + k) + 0.05 * rng.standard_normal(len(steps)) for k, m in enumerate(metrics)}  # fmt: skip
            bulk_load(trial.id, "training", steps, series, started_at=STARTED_AT)
        print(f"  {key}: {trials} trials loaded in {time.perf_counter() - t0:.0f} s", flush=True)
        out[key] = {"experiment": experiment.id, "charts": n_metrics}
    Path(args.out).write_text(json.dumps(out))


def _drawn(page: Any, charts: int, timeout_s: float) -> dict[str, Any]:
    """Poll (page.evaluate: no eval under the CSP) until the metric board's charts have drawn."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = page.evaluate(DRAWN_JS, charts)
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError(f"the charts did not draw within {timeout_s:.0f} s")


args_verbose = False  # --verbose: each load's timeline (fetches, Plotly, DOMContentLoaded)


def browse(server: Server, loaded: dict[str, Any], rounds: int) -> dict[str, float]:
    """Open each page ``rounds`` times per mode: medians of draw time, HTML bytes, elements."""
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS

    figures: dict[str, float] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(f"{server.url}/accounts/login/")
            page.fill("input[name=username]", "bench")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            for key, info in loaded.items():
                url = f"{server.url}/experiments/{info['experiment']}/"
                page.goto(url)  # unmeasured: the first load pays the server's cold caches
                _drawn(page, info["charts"], 600)
                for mode in MODES:
                    found: dict[str, list[float]] = {"ms": [], "html": [], "el": [], "tr": []}
                    for _ in range(rounds):
                        page.goto("about:blank")
                        response = page.goto(
                            url + ("" if mode == "auto" else f"?chart_mode={mode}")
                        )
                        drawn = _drawn(page, info["charts"], 600)
                        if args_verbose:
                            print(
                                "   ",
                                {
                                    k: drawn[k]
                                    for k in ("data_at", "series", "plotly", "dom_ready", "ms")
                                },
                            )
                        found["ms"].append(drawn["ms"])
                        found["html"].append(len(response.body()) if response else 0)
                        found["el"].append(drawn["elements"])
                        found["tr"].append(drawn["traces"])
                    for name, field in (("ms", "ms"), ("html_bytes", "html"), ("elements", "el"), ("traces", "tr")):  # fmt: skip
                        figures[f"{key}_{mode}_{name}"] = statistics.median(found[field])
                    print(
                        f"  {key} {mode:4s}: drawn {figures[f'{key}_{mode}_ms']:7.0f} ms"
                        f" (rounds {', '.join(f'{t:.0f}' for t in found['ms'])}),"
                        f" HTML {figures[f'{key}_{mode}_html_bytes'] / 1000:7.1f} KB,"
                        f" {figures[f'{key}_{mode}_elements']:7.0f} elements,"
                        f" {figures[f'{key}_{mode}_traces']:5.0f} traces",
                        flush=True,
                    )
        finally:
            browser.close()
    return figures


def measure(args: argparse.Namespace) -> dict[str, float]:
    """Load (child process), serve and browse this tree."""
    backend = Backend.sqlite()
    try:
        backend.prepare()
        out = backend.var_dir / "loaded.json"
        cmd = [sys.executable, __file__, "--child", "--out", str(out)]
        cmd += ["--trials", str(args.trials), "--big-trials", str(args.big_trials)]
        cmd += ["--steps", str(args.steps)]
        print("loading the searches (SQLite) ...", flush=True)
        subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
        loaded = json.loads(out.read_text())
        kind = "serve" if gunicorn_available() else "runserver"
        with Server(backend, kind=kind) as server:
            return browse(server, loaded, args.rounds)
    finally:
        backend.cleanup()


def load_average() -> str:
    """The machine's 1/5/15-minute load averages, for the record."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=pick(100, 30))
    parser.add_argument("--big-trials", type=int, default=pick(1000, 60))
    parser.add_argument("--steps", type=int, default=pick(200, 50))
    parser.add_argument("--rounds", type=int, default=pick(3, 1), help="loads per page and mode")
    parser.add_argument("--baseline", default=None, help=f"commit (default {BASELINE_REF[:10]})")
    parser.add_argument("--verbose", action="store_true", help="print each load's timeline")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    global args_verbose
    args_verbose = args.verbose
    if args.trials < 2 or args.big_trials < 2 or args.steps < 2 or args.rounds < 1:
        parser.error("--trials, --big-trials, --steps >= 2; --rounds >= 1")
    if args.baseline is not None:
        os.environ["HEADWAY_BENCH_BASELINE"] = args.baseline
    ref = None if tiny() else wanted(BASELINE_REF)  # tiny mode proves it runs: no baseline
    figures: dict[str, Any] = {"load_before": load_average()}
    baseline: dict[str, Any] | None = None
    if ref:
        own = ["--trials", str(args.trials), "--big-trials", str(args.big_trials)]
        own += ["--steps", str(args.steps), "--rounds", str(args.rounds)]
        baseline = run_baseline(ref, "dashboard_scale.py", own)
    print("measuring this tree ...", flush=True)
    figures.update(measure(args))
    figures["load_after"] = load_average()
    print()
    for key, target in TARGETS.items():
        print(
            f"{key:20s} {figures[key]:>10,.0f}  target {target:>9,.0f}  ({figures[key] / target:.2f})"
        )
        figures[f"target_ratio_{key}"] = round(figures[key] / target, 3)
    for key in ("t1000", "t100"):
        # The old drawing (one trace per trial) against the merged one, both on this tree.
        ratio = figures[f"{key}_svg_ms"] / max(1.0, figures[f"{key}_auto_ms"])
        print(f"{key}: per-trial traces / merged lines draw time {ratio:.2f}x")
        figures[f"{key}_svg_over_auto"] = round(ratio, 3)
    if baseline:
        keys = [f"{k}_auto_{f}" for k in ("t1000", "t100") for f in ("ms", "html_bytes", "elements", "traces")]  # fmt: skip
        figures.update(compare(figures, baseline, ref or "", keys))
    print(f"load average before {figures['load_before']}, after {figures['load_after']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
