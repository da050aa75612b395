"""Every dashboard page with data behind it, for the layout and accessibility browser tests
(tests/dashboard/test_dashboard_layout_browser.py, tests/dashboard/test_dashboard_a11y_browser.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from registry import model_registry
from registry.lifecycle import experiment_create
from registry.metrics import metrics_report, parse_reports
from registry.models import TrialLog
from tests.dashboard.test_dashboard_lineage import _run_and_continue
from tests.helpers import TINY_MODEL, register_checkpoint, register_host

USERNAME = "paige"
PASSWORD = "pw-paige"
TRIALS = 6
STEPS = 200

# A search with a long name and long labels: long words must wrap, not widen the page.
CONFIG = """
name: a-rather-long-experiment-name-that-must-wrap-on-a-phone-screen-390px
description: The pages' layout and accessibility fixture.
labels: [narrow-screens, dark-theme, keyboard]
entrypoint: model_def:TinyTrial
hyperparameters:
  global_batch_size: 8
  lr: {type: log, minval: -3, maxval: -1}
  optimizer: {type: categorical, vals: [sgd, adam]}
  hidden_units_in_the_first_layer: {type: int, minval: 16, maxval: 256}
searcher: {name: random, metric: validation_loss, max_trials: 6, max_length: {batches: 200}}
"""


def populate() -> tuple[Any, dict[str, str]]:
    """Create the fixture and return its owner and ``{page name: path}`` for every dashboard
    page but the login form.

    The fixture: an experiment of 6 trials (enough for the importance chart) reporting training
    and validation metrics, a checkpoint, log lines, a registered model with a version, worker
    hosts, and a trial continued from another one, with system metrics."""
    owner = get_user_model().objects.create_user(USERNAME, password=PASSWORD)
    experiment = experiment_create(owner=owner, config_source=CONFIG, model_definition=TINY_MODEL)
    trials = list(experiment.trials.order_by("id"))
    assert len(trials) == TRIALS
    for i, trial in enumerate(trials):
        reports = [
            {
                "group": "training",
                "steps_completed": step,
                "metrics": {"loss": 1.0 / step + 0.1 * i, "learning_rate": 0.001 * (i + 1)},
            }
            for step in range(10, STEPS + 1, 10)
        ]
        reports += [
            {
                "group": "validation",
                "steps_completed": step,
                "metrics": {"validation_loss": 0.5 / step + 0.1 * i, "accuracy": 0.6 + 0.1 * i},
            }
            for step in (100, 200)
        ]
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
    first = trials[0]
    checkpoint = register_checkpoint(first, steps_completed=STEPS, size=4096)
    for i in range(30):
        TrialLog.objects.create(trial=first, run_id=1, message=f"epoch {i}: loss={1 / (i + 1):.4f}")
    TrialLog.objects.create(trial=first, run_id=1, message="RuntimeError: CUDA out of memory")
    model = model_registry.model_create(
        owner=owner, name="digits-classifier", description="Digits, from the search."
    )
    model_registry.version_register(model=model, user=owner, checkpoint_uuid=checkpoint.uuid)
    register_host("gpu-host-with-a-long-name-01.cluster.example.org", 4, gpu=True)
    # A continued trial (linked to its parent, dashed parent curve) with system metrics.
    _, continued = _run_and_continue(owner)
    ids = "&".join(f"trial={t.id}" for t in trials)
    pages = {
        "experiments": "/",
        "experiment": f"/experiments/{experiment.id}/",
        "experiment-files": f"/experiments/{experiment.id}/files/?path=model_def.py",
        "trial": f"/trials/{first.id}/",
        "trial-logs": f"/trials/{first.id}/logs/",
        "trial-continued": f"/trials/{continued.id}/",
        "compare": f"/compare/?{ids}",
        "models": "/models/",
        "model": "/models/digits-classifier/",
        "workers": "/workers/",
        "workspaces": "/workspaces/",
        "workspace": f"/workspaces/{experiment.project.workspace_id}/",
        "project": f"/projects/{experiment.project_id}/",
        "not-found": "/no-such-page/",
    }
    return owner, pages


# Bounded: page.evaluate has no timeout, and a page that is not rendering never runs its
# animation-frame callbacks (a full run sat 60 minutes in a Playwright call while an
# experiment page polled); after 2 s the caller's own checks, which time out, take over.
TWO_FRAMES = """new Promise((done) => {
  requestAnimationFrame(() => requestAnimationFrame(done));
  setTimeout(done, 2000);
})"""
# Every metric chart and the importance chart drawn (or its message shown), and every Plotly div.
DRAWN = """() => {
  const charts = Array.from(document.querySelectorAll('.plot[data-key], div#hparam-importance'));
  return charts.concat(Array.from(document.querySelectorAll('.js-plotly-plot')))
    .every((gd) => gd._fullLayout);
}"""


def settle(page: Any) -> None:
    """Scroll through the page (charts and the importance chart are drawn only near the
    viewport), back to the top, and wait until every chart is drawn: layout and axe then see
    the whole page."""
    page.wait_for_load_state("networkidle")
    height = page.evaluate("document.documentElement.scrollHeight")
    step = page.evaluate("window.innerHeight")
    for y in range(0, height + step, step):
        page.evaluate(f"window.scrollTo(0, {y})")
        page.evaluate(TWO_FRAMES)  # the IntersectionObservers have seen this position
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_function(DRAWN)
