"""Every benchmark of ``make bench`` runs in tiny mode and ends with its JSON line.

A benchmark is code nobody runs in CI otherwise, so a change that breaks one (an API it calls, a
storage rule it must follow) shows up here instead of on the next ``make bench``. Each runs as
``make bench`` runs it, a subprocess of ``bench/run_all.py``'s own ``run_one`` (its own process
group, killed after it), with ``HEADWAY_BENCH_TINY=1`` on the embedded default (SQLite): the
PostgreSQL pass is ``make bench``'s. Only the shape of the result is checked, never a number.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.helpers import IN_CI, REPO, require

sys.path.insert(0, str(REPO / "bench"))
import run_all

# Keys each benchmark's JSON line must hold (a few per benchmark: its headline figures).
EXPECTED_KEYS = {
    "harness_overhead": {
        "tiny_ratio",
        "tiny_ratio_range",
        "large_ratio",
        "system_metrics_ratio",
        "lightning",
    },
    "metrics_ingest": {"sqlite_batched_points_per_s", "sqlite_single_p50_ms"},
    "sdk_reporting": {"sqlite_steps_per_s", "sqlite_reporting_cpu_us_per_step", "sqlite_verified"},
    # Its MLflow keys are null (mlflow_not_measured says why) without the bench extra.
    "logging_overhead": {
        "mlflow_not_measured",
        "sqlite_fit_none_s",
        "sqlite_overhead_headway_pct",
        "sqlite_verified_headway",
        "sqlite_overhead_mlflow_pct",
        "sqlite_api_ratio",
    },
    "tensorboard_writer": {"headway_steps_per_s", "baseline_steps_per_s", "ratio", "verified"},
    "metrics_read": {"sqlite_overview_ms", "sqlite_zoom_ms"},
    "hparam_importance": {"sqlite_fit_10_ms", "sqlite_cached_10_ms"},
    "run_filter": {"sqlite_metric_range_p50_ms", "sqlite_combined_speedup", "sqlite_rest_p50_ms"},
    "dashboard": {"sqlite_overview_total_ms", "sqlite_trial_total_ms"},
    "dashboard_scale": {"t1000_auto_ms", "t100_auto_ms", "t1000_auto_html_bytes"},
    "preempt_latency": {"signal_p50_s", "paused_p50_s", "healthz_p50_s", "serve_exit_s"},
    "scheduling": {"trials_started_per_s", "queued_to_claimed_p50_s", "wall_vs_bare_processes"},
    "scheduling_scale": {
        "placements_per_s_1000_hosts",
        "heartbeats_per_s",
        "pass_ratio_8x_hosts",
        "rest_placements_per_s_1000_hosts",
        "rest_heartbeats_per_s",
    },
    "ddp_overhead": {"backend", "ranks"},
    "serving": {"polls", "gunicorn_gthread_polls_wall_s"},
    "overload": {"baseline", "loaded", "trials_stopped", "points_lost", "heartbeat_p99_s"},
    "checkpoint_io": {"sizes", "server_rss_resting_mb", "server_rss_growth_tar_mb", "worst_ratio"},
}
# Per benchmark, in tiny mode (each takes seconds to a minute on a busy 2-core machine).
TIMEOUT_S = 300


def test_every_benchmark_has_expected_keys() -> None:
    assert set(EXPECTED_KEYS) == set(run_all.BENCHMARKS)


def test_last_json_reads_the_last_line_only() -> None:
    assert run_all.last_json('note\n{"a": 1}\n\n') == {"a": 1}
    assert run_all.last_json('{"a": 1}\nnot json\n') is None
    assert run_all.last_json("[1, 2]\n") is None
    assert run_all.last_json("") is None


@pytest.mark.slow
@pytest.mark.parametrize("name", run_all.BENCHMARKS)
def test_benchmark_runs_in_tiny_mode(name: str) -> None:
    if name == "checkpoint_io":
        require(importlib.util.find_spec("moto") is not None, "moto is not installed")
    env = run_all.pass_env("sqlite", tiny=True)
    env.pop("HEADWAY_STORAGE_LOCATIONS", None)  # the benchmark names its own
    figures = run_all.run_one(name, env, TIMEOUT_S)
    assert "error" not in figures, figures.get("error")
    missing = EXPECTED_KEYS[name] - set(figures)
    assert not missing, f"{name}'s JSON line lacks {sorted(missing)}: {sorted(figures)}"
    if name == "checkpoint_io":
        import _checkpoint_setup
        import checkpoint_io

        rows = next(iter(figures["sizes"].values()))
        expected = {headway for headway, _ in checkpoint_io.PAIRS}
        if _checkpoint_setup.nginx_binary() is None:  # said in the JSON line, not silently
            assert not IN_CI, "nginx missing (CI=true: .ci/run installs nginx-light)"
            assert figures["static_http"] == "nginx not installed"
            expected -= set(checkpoint_io.NEEDS_NGINX)
        assert set(rows) == expected
        for row in rows.values():
            assert {"ratio", "ratio_range", "cpu_s", "baseline_cpu_s"} <= set(row)


def test_tiny_mode_is_off_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    import _tiny

    monkeypatch.delenv(_tiny.ENV, raising=False)
    assert _tiny.pick(500, 8) == 500
    monkeypatch.setenv(_tiny.ENV, "1")
    assert _tiny.pick(500, 8) == 8
    monkeypatch.setenv(_tiny.ENV, "0")
    assert not _tiny.tiny()
