"""A finished random search whose metric depends on known hyperparameters, for the importance
endpoint and the hyperparameter views: ``lr`` and ``optimizer`` matter, ``dropout`` and
``layers.width`` do not."""

from __future__ import annotations

import math
import random

from registry.metrics import metrics_report, parse_reports
from registry.models import Experiment, FitState, HparamImportanceFit, State, Trial
from registry.tasks import hparam_importance as fit_task
from tests.helpers import DASHBOARD_CONFIG, make_tar_gz

OPTIMIZERS = ("adam", "sgd")


def accuracy_of(hparams: dict) -> float:
    """The search's validation_accuracy: best at lr = 10**-2.5, adam 0.05 better than sgd."""
    distance = abs(math.log10(hparams["lr"]) + 2.5)
    return 0.9 - 0.1 * distance + (0.05 if hparams["optimizer"] == "adam" else 0.0)


def hparam_search(
    owner, trials: int, name: str = "hparam-search"
) -> tuple[Experiment, list[Trial]]:
    """A COMPLETED random search of ``trials`` trials, each with two validation reports
    (``validation_accuracy`` rising to ``accuracy_of(hparams)``, and ``validation_loss``)
    through ``registry.metrics.metrics_report``, which keeps ``best_validation``."""
    config = {
        **DASHBOARD_CONFIG,
        "searcher": {**DASHBOARD_CONFIG["searcher"], "name": "random", "max_trials": trials},
    }
    experiment = Experiment.objects.create(
        owner=owner,
        name=name,
        config=config,
        state=State.COMPLETED,
        model_definition=make_tar_gz({"model_def.py": "class T:\n    pass\n"}),
    )
    rng = random.Random(25)
    made = []
    for i in range(trials):
        hparams = {
            "lr": 10 ** rng.uniform(-4, -1),
            "dropout": round(rng.uniform(0.1, 0.5), 3),  # a linear axis (max / min < 100)
            "optimizer": OPTIMIZERS[i % 2],
            "layers": {"width": rng.choice((32, 64, 128))},
        }
        trial = Trial.objects.create(
            experiment=experiment, hparams=hparams, state=State.COMPLETED, steps_completed=100
        )
        final = accuracy_of(hparams)
        reports = [
            {
                "group": "validation",
                "steps_completed": step,
                "metrics": {
                    "validation_accuracy": final * step / 100,
                    "validation_loss": 1 - final,
                },
            }
            for step in (50, 100)
        ]
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
        trial.refresh_from_db()
        made.append(trial)
    return experiment, made


def run_queued_fits() -> int:
    """Run each queued importance fit's task, as the master's worker does with the messages it
    receives (tests send them to a queue no worker reads); returns how many ran."""
    queued = list(
        HparamImportanceFit.objects.filter(state=FitState.QUEUED).values_list("id", flat=True)
    )
    for fit_id in queued:
        fit_task(fit_id)
    return len(queued)


def search_with_system_metrics(owner, trials: int = 60) -> tuple[Experiment, list[Trial]]:
    """A finished ``trials``-trial search whose first two trials also report ``system/cpu_util``."""
    experiment, made = hparam_search(owner, trials, name=f"scale-{trials}")
    for trial in made[:2]:
        reports = [
            {"group": "system", "steps_completed": step, "metrics": {"cpu_util": 10.0 + step}}
            for step in (50, 100)
        ]
        metrics_report(trial_id=trial.id, reports=parse_reports({"reports": reports}))
    return experiment, made
