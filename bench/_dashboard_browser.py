"""The experiment overview drawn in real Chromium: navigation start to every visible chart drawn.

Part of ``bench/dashboard.py`` (``--no-browser`` skips it). On a fresh SQLite database a child
process bulk-loads (``_fixtures.load_metric_experiment``) two searches:

- ``t100``: ``--browser-trials`` (100) trials x 5 metrics x ``--browser-steps`` (10,000) steps;
- ``t1000``: ``--big-trials`` (1,000) trials x 3 metrics x ``--big-steps`` (2,000) steps;

and measures, in process (Django test ``Client``: server time, no network), the chart data
request each overview makes (as ``static/js/charts.js`` builds it: every metric, ``max_points``
from the same budget, ``band=true``), median of ``--repeat``, with its JSON size; and the same
request in the M4 shape (``band=false``) for the payload ratio.

Then ``manage.py serve``'s gunicorn (or runserver without gunicorn) serves the database and a
headless Chromium (``tests/browser.py``'s binary and flags, Content-Security-Policy on) logs in
and opens ``/experiments/<id>/#metrics-board`` (the charts at the top of the window, 1400 x 1000)
``--rounds`` (3) times per trace mode: the page's own choice (``auto``) and each forced one
(``?chart_mode=svg|gl|merged|merged-gl``, static/js/chart_traces.js; tiny mode: ``auto`` only). A round's time is the
latest ``data-drawn-at`` (``performance.now()`` when Plotly's draw resolved, i.e. ms since
navigation start) over the charts intersecting the window; the figure is the median of the
rounds, with the page's element count. Targets: t100 <= 2,000 ms, t1000 <= 5,000 ms, the server's
chart data for t1000 <= 300 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _server import REPO, Backend, Server, gunicorn_available
from _tiny import pick, tiny

TARGETS_MS = {"t100": 2000.0, "t1000": 5000.0, "t1000_data": 300.0}
MODES = ("auto", "svg", "gl", "merged", "merged-gl")


def modes() -> tuple[str, ...]:
    """The trace modes measured: all, or the page's own choice only in tiny mode."""
    return ("auto",) if tiny() else MODES


PASSWORD = "bench-pw"
VIEWPORT: Any = {"width": 1400, "height": 1000}  # playwright ViewportSize
# The charts intersecting the window, once each has drawn; null while any is still drawing.
DRAWN_JS = """() => {
  const plots = Array.from(document.querySelectorAll('#metrics-board .plot'));
  const seen = plots.filter((p) => {
    const r = p.getBoundingClientRect();
    return r.bottom > 0 && r.top < window.innerHeight;
  });
  if (!seen.length || seen.some((p) => !p.dataset.drawnAt || p.dataset.rendering)) return null;
  return {
    ms: Math.max(...seen.map((p) => Number(p.dataset.drawnAt))),
    charts: seen.length,
    elements: document.getElementsByTagName('*').length,
    mode: seen[0].dataset.mode,
  };
}"""


def chart_max_points(trials: int, metrics: int) -> int:
    """``max_points`` of the overview's request (charts.js ``pointsPerTrace``)."""
    return max(50, min(2000, 30000 // max(1, trials * metrics)))


def child(args: argparse.Namespace) -> None:
    """(child) Load both searches, time their chart data in process, write JSON to ``out``."""
    import django

    django.setup()
    import numpy as np
    from _fixtures import load_metric_experiment, timed_get
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.get(username="bench")
    user.set_password(PASSWORD)
    user.save()
    client = Client()
    client.force_login(user)
    out: dict[str, Any] = {}
    sizes = {
        "t100": (args.browser_trials, args.browser_steps, 5),
        "t1000": (args.big_trials, args.big_steps, 3),
    }
    for key, (trials, steps, n_metrics) in sizes.items():
        metrics = tuple(f"m{k}" for k in range(n_metrics))
        t0 = time.perf_counter()
        experiment, _, points = load_metric_experiment(
            user, name=key, trials=trials, steps=steps, rng=np.random.default_rng(0),
            metrics=metrics,
        )  # fmt: skip
        print(f"  {key}: {points:,} points in {time.perf_counter() - t0:.0f} s", flush=True)
        names = "".join(f"name={m}&" for m in metrics)
        base = f"/api/v1/experiments/{experiment.id}/metrics/?{names}"
        base += f"max_points={chart_max_points(trials, n_metrics)}"
        client.get(base + "&band=true")  # warm: the first read of a fresh file pays the I/O
        client.get(base)
        cpu = []
        for _ in range(args.repeat):  # CPU time: what a busy machine's wall time hides
            c0 = time.process_time()
            client.get(base + "&band=true")
            cpu.append((time.process_time() - c0) * 1000)
        ms, response = timed_get(client, base + "&band=true", args.repeat)
        m4_ms, m4 = timed_get(client, base, args.repeat)
        out[key] = {
            "experiment": experiment.id,
            "points": points,
            "data_ms": ms,
            "data_cpu_ms": statistics.median(cpu),
            "data_bytes": len(response.content),
            "m4_data_ms": m4_ms,
            "m4_data_bytes": len(m4.content),
        }
    Path(args.out).write_text(json.dumps(out))


def _drawn(page: Any, timeout_s: float = 120.0) -> dict[str, Any]:
    """Poll (page.evaluate: no eval under the CSP) until the visible charts have drawn."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = page.evaluate(DRAWN_JS)
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError("the overview's charts did not draw in time")


def _browse(server: Server, loaded: dict[str, Any], rounds: int) -> dict[str, float]:
    """Open each overview ``rounds`` times per mode; the median draw time and element count."""
    sys.path.insert(0, str(REPO))
    from playwright.sync_api import sync_playwright

    from tests.browser import CHROMIUM, CHROMIUM_ARGS

    figures: dict[str, float] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(f"{server.url}/accounts/login/")
            page.fill("input[name=username]", "bench")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            for key, info in loaded.items():
                # One unmeasured load first: the first one after the server started pays its
                # cold caches (it was 1.4-2.4x the later ones), which would bias the first mode.
                page.goto(f"{server.url}/experiments/{info['experiment']}/#metrics-board")
                _drawn(page)
                for mode in modes():
                    query = "" if mode == "auto" else f"?chart_mode={mode}"
                    url = f"{server.url}/experiments/{info['experiment']}/{query}#metrics-board"
                    times, elements, used = [], [], ""
                    for _ in range(rounds):
                        page.goto("about:blank")
                        page.goto(url)
                        found = _drawn(page)
                        times.append(found["ms"])
                        elements.append(found["elements"])
                        used = found["mode"]
                    figures[f"{key}_{mode}_ms"] = statistics.median(times)
                    figures[f"{key}_{mode}_elements"] = statistics.median(elements)
                    print(
                        f"  {key} {mode:9s} ({used}): {statistics.median(times):7.0f} ms"
                        f" (rounds {', '.join(f'{t:.0f}' for t in times)}),"
                        f" {statistics.median(elements):.0f} elements",
                        flush=True,
                    )
        finally:
            browser.close()
    return figures


def available() -> str | None:
    """Why the browser part cannot run here (no Chromium or Playwright), else None."""
    sys.path.insert(0, str(REPO))
    from tests.browser import CHROMIUM

    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is not installed"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def measure(args: argparse.Namespace, entry_point: str) -> dict[str, float]:
    """Load, serve and browse; returns the figures (keys prefixed ``browser_``)."""
    backend = Backend.sqlite()
    try:
        backend.prepare()
        out = backend.var_dir / "browser.json"
        cmd = [sys.executable, entry_point, "--browser-child", "--out", str(out)]
        cmd += ["--browser-trials", str(args.browser_trials)]
        cmd += ["--browser-steps", str(args.browser_steps), "--big-trials", str(args.big_trials)]
        cmd += ["--big-steps", str(args.big_steps), "--repeat", str(args.repeat)]
        print("loading the browser overviews (SQLite) ...", flush=True)
        subprocess.run(cmd, cwd=REPO, env=backend.env, check=True)
        loaded = json.loads(out.read_text())
        kind = "serve" if gunicorn_available() else "runserver"
        with Server(backend, kind=kind) as server:
            figures = _browse(server, loaded, args.rounds)
    finally:
        backend.cleanup()
    for key, info in loaded.items():
        fields = ("points", "data_ms", "data_cpu_ms", "data_bytes", "m4_data_ms", "m4_data_bytes")
        for field in fields:
            figures[f"{key}_{field}"] = info[field]
    return {f"browser_{k}": v for k, v in figures.items()}


def print_table(figures: dict[str, float], args: argparse.Namespace) -> None:
    """The browser figures against their targets (ratio = ms / target)."""
    f = {k.removeprefix("browser_"): v for k, v in figures.items()}
    print(f"{'overview':9s} {'mode':10s} {'ms':>8s} {'target':>7s} {'ratio':>6s} {'elements':>9s}")
    for key in ("t100", "t1000"):
        for mode in modes():
            ms = f[f"{key}_{mode}_ms"]
            line = f"{key:9s} {mode:10s} {ms:8.0f} {TARGETS_MS[key]:7.0f}"
            line += f" {ms / TARGETS_MS[key]:6.2f} {f[f'{key}_{mode}_elements']:9.0f}"
            print(line)
    for key in ("t100", "t1000"):
        ratio = f[f"{key}_data_bytes"] / f[f"{key}_m4_data_bytes"]
        line = f"{key} chart data (server, in process): {f[f'{key}_data_ms']:.1f} ms"
        line += f" (CPU {f[f'{key}_data_cpu_ms']:.1f} ms),"
        line += f" {f[f'{key}_data_bytes'] / 1000:.0f} KB band shape;"
        line += (
            f" M4 shape {f[f'{key}_m4_data_ms']:.1f} ms, {f[f'{key}_m4_data_bytes'] / 1000:.0f} KB"
        )
        line += f" (band / M4 bytes {ratio:.2f})"
        print(line)
    print(
        f"t100: {args.browser_trials} trials x 5 metrics x {args.browser_steps:,} steps; t1000:"
        f" {args.big_trials} trials x 3 metrics x {args.big_steps:,} steps. Targets: t100 <="
        f" 2,000 ms, t1000 <= 5,000 ms (navigation start to every visible chart drawn, median"
        f" of {args.rounds}); t1000 chart data <= 300 ms"
        f" ({f['t1000_data_ms'] / TARGETS_MS['t1000_data']:.2f} of it)."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The browser part's flags on ``bench/dashboard.py``'s parser."""
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    parser.add_argument("--browser-trials", type=int, default=pick(100, 3))
    parser.add_argument("--browser-steps", type=int, default=pick(10_000, 300))
    parser.add_argument("--big-trials", type=int, default=pick(1000, 4))
    parser.add_argument("--big-steps", type=int, default=pick(2000, 300))
    parser.add_argument(
        "--rounds", type=int, default=pick(3, 1), help="page loads per mode (median)"
    )
    parser.add_argument("--browser-child", action="store_true", help=argparse.SUPPRESS)
