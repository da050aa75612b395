"""System metrics from a trial on the cluster: its metrics hold a ``system`` group.

The unit tests of the sampler are in tests/headway/core/test_system_metrics.py."""

from __future__ import annotations

import pytest

from headway.core._system_metrics import SYSTEM_GROUP


@pytest.mark.integration
@pytest.mark.slow
def test_a_trial_on_the_cluster_reports_a_system_group(cluster_api) -> None:
    from tests.helpers import REPO

    digits = REPO / "examples" / "digits"
    trial = cluster_api.submit(
        digits / "const.yaml",
        digits,
        searcher={"max_length": {"batches": 90}},
        min_checkpoint_period={"batches": 90},
        system_metrics={"enabled": True, "interval_s": 0.2},
    )
    done = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] in ("COMPLETED", "ERROR"), "the digits trial to end"
    )
    assert done["state"] == "COMPLETED", cluster_api.logs(trial["id"])[-30:]
    steps, values = cluster_api.series(trial["id"], SYSTEM_GROUP, "process_rss_mib")
    assert steps and all(0 <= s <= 90 for s in steps)
    assert all(v > 1 for v in values)  # MiB of a process that imported torch
    steps, values = cluster_api.series(trial["id"], SYSTEM_GROUP, "cpu_util_percent")
    assert steps and all(0 <= v <= 100 for v in values)
    # The harness's counters reach the sampler: batches/s and samples/s (global_batch_size 32).
    _, batches = cluster_api.series(trial["id"], SYSTEM_GROUP, "batches_per_second")
    _, samples = cluster_api.series(trial["id"], SYSTEM_GROUP, "samples_per_second")
    assert max(batches) > 0 and max(samples) == pytest.approx(32 * max(batches), rel=0.5)
