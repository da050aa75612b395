"""System metrics of a trial: the sampler (real psutil), its config and env switch,
and a trial run on the test cluster whose ``system`` group the REST API returns."""

from __future__ import annotations

import threading
import time

import pytest

from headway import core
from headway.core._system_metrics import (
    SYSTEM_GROUP,
    SystemMetricsSampler,
    env_switch,
    sampler_config,
)
from headway.expconf import ConfigError, SystemMetricsConfig

EXAMPLE_CONFIG = SystemMetricsConfig(enabled=True, interval_s=0.2)


def test_a_sample_holds_cpu_memory_and_throughput_in_range() -> None:
    batches = [0]
    sampler = SystemMetricsSampler(lambda *_: None, 10.0, lambda: (batches[0], batches[0] * 32))
    sampler.sample()  # primes CPU percentages and counters
    end = time.monotonic() + 0.2
    while time.monotonic() < end:  # some CPU work and some "batches" between two samples
        sum(i * i for i in range(10_000))
        batches[0] += 1
    steps, metrics = sampler.sample()
    assert steps == batches[0]
    assert 0.0 <= metrics["cpu_util_percent"] <= 100.0
    assert metrics["process_cpu_percent"] > 0.0
    assert 1.0 < metrics["process_rss_mib"] < 1024 * 1024
    assert 0.0 < metrics["memory_used_percent"] <= 100.0
    assert metrics["memory_used_mib"] > 0
    assert metrics["batches_per_second"] > 0
    assert metrics["samples_per_second"] == pytest.approx(32 * metrics["batches_per_second"])
    # No GPU on this machine (or NVML missing): no GPU metrics, and no error either.
    gpu = [name for name in metrics if name.startswith("gpu")]
    assert all(name.endswith(("_util_percent", "_memory_used_mib")) for name in gpu)


def test_the_thread_reports_once_per_interval_and_stops_on_close() -> None:
    reports: list[tuple[int, dict]] = []
    got_three = threading.Event()

    def report(steps: int, metrics: dict) -> None:
        reports.append((steps, metrics))
        if len(reports) >= 3:
            got_three.set()

    sampler = SystemMetricsSampler(report, 0.2)
    started = time.monotonic()
    sampler.start()
    assert got_three.wait(30)
    elapsed = time.monotonic() - started
    sampler.close()
    count = len(reports)
    # Three reports need three full intervals (the thread sleeps between samples; never early).
    assert elapsed >= 3 * 0.2
    assert sampler._thread is not None and not sampler._thread.is_alive()
    assert len(reports) == count  # nothing after close
    assert all(steps == 0 for steps, _ in reports)  # no counters: batch 0


def test_config_and_env_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEADWAY_SYSTEM_METRICS", raising=False)
    assert sampler_config(None, managed=True).enabled
    assert sampler_config(SystemMetricsConfig(), managed=True).interval_s == 10.0
    assert not sampler_config(None, managed=False).enabled  # local mode: off unless asked
    off = SystemMetricsConfig(enabled=False)
    assert not sampler_config(off, managed=True).enabled
    assert sampler_config(EXAMPLE_CONFIG, managed=True).interval_s == 0.2
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    assert not sampler_config(EXAMPLE_CONFIG, managed=True).enabled
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "1")
    assert sampler_config(None, managed=False).enabled
    assert not sampler_config(off, managed=True).enabled  # the config's "off" still holds
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "maybe")
    with pytest.raises(ValueError, match="HEADWAY_SYSTEM_METRICS"):
        env_switch()


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"interval_s": 0}, "system_metrics.interval_s"),
        ({"interval_s": -1.5}, "system_metrics.interval_s"),
        ({"interval_s": "10"}, "system_metrics.interval_s"),
        ({"interval_s": float("nan")}, "system_metrics.interval_s"),
        ({"enabled": "yes"}, "system_metrics.enabled"),
        ({"every": 3}, "system_metrics.every"),
    ],
)
def test_bad_config_values_name_the_field(section: dict, field: str) -> None:
    from headway.expconf import parse_experiment_config

    base = {"entrypoint": "x", "searcher": {"name": "single", "metric": "m", "max_length": 1}}
    with pytest.raises(ConfigError) as caught:
        parse_experiment_config({**base, "system_metrics": section})
    assert field in caught.value.errors


def test_local_mode_reports_through_the_trials_own_sink(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("HEADWAY_CLUSTER_INFO", raising=False)
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    with core.init(checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.system_metrics is None
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "1")
    with core.init(checkpoint_storage=str(tmp_path)) as ctx:
        assert ctx.system_metrics is not None and ctx.system_metrics.interval_s == 10.0
        ctx.train.report_training_metrics(steps_completed=7, metrics={"loss": 1.0})
        # One sample by hand (the thread's first comes after 10 s): same path as the thread's.
        ctx.train._report_system(*ctx.system_metrics.sample())
        (report,) = ctx.train.reported_metrics(SYSTEM_GROUP)
    assert report["steps_completed"] == 7  # the Core API path: the last reported step
    assert "process_rss_mib" in report["metrics"]
    thread = ctx.system_metrics._thread
    assert thread is not None and not thread.is_alive()  # started by `with`, stopped at its end


def test_a_worker_hosts_switch_reaches_its_trials() -> None:
    from workers.isolation import trial_base_environment

    worker = {"HEADWAY_SYSTEM_METRICS": "0", "HEADWAY_DATABASE_PASSWORD": "secret"}
    assert trial_base_environment(worker, storage_type="shared_fs") == {
        "HEADWAY_SYSTEM_METRICS": "0"
    }
