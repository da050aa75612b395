"""The dashboard shows an unmanaged trial (made by ``core_v2.init()``, no model definition) like
any other: its experiment, trial and files pages render."""

from __future__ import annotations

from django.urls import reverse

from registry import lifecycle
from registry.metrics import metrics_report, parse_reports


def test_an_unmanaged_experiment_renders_like_any_other(client_alice, alice) -> None:
    started = lifecycle.unmanaged_start(
        owner=alice,
        config_source={"name": "from-a-laptop", "searcher": {"metric": "loss"}},
        external_experiment_id="laptop-1",
        external_trial_id="t1",
        hparams={"lr": 0.01},
    )
    reports = parse_reports(
        {"reports": [{"group": "validation", "steps_completed": 5, "metrics": {"loss": 0.3}}]}
    )
    metrics_report(trial_id=started.trial.id, reports=reports, run_id=started.run.run_id)
    experiment_id, trial_id = started.experiment.id, started.trial.id
    page = client_alice.get(reverse("dashboard:experiment", args=[experiment_id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "from-a-laptop" in html and "Unmanaged" in html
    assert client_alice.get(reverse("dashboard:trial", args=[trial_id])).status_code == 200
    files = client_alice.get(reverse("dashboard:experiment-files", args=[experiment_id]))
    assert files.status_code == 200
    assert client_alice.get(reverse("dashboard:experiments")).status_code == 200
    lifecycle.unmanaged_run_exited(trial_id=trial_id, run_id=started.run.run_id, exit_code=0)
    page = client_alice.get(reverse("dashboard:experiment", args=[experiment_id]))
    assert page.status_code == 200 and "COMPLETED" in page.content.decode()
