"""Drop config fields that are now refused (docs/decisions/sdk.md): stored configs must re-parse.

Experiments stored before the refusal carry the old defaults ``save_experiment_best: 0``,
``save_trial_best: 1`` and ``save_trial_latest: 1`` (never applied: every checkpoint was kept)
and possibly ``count`` on hyperparameters (never used).
"""

from django.db import migrations

_RETENTION = ("save_experiment_best", "save_trial_best", "save_trial_latest")


def _drop_count(space):
    if not isinstance(space, dict):
        return space
    if space.get("type") in ("int", "double", "log"):
        return {k: v for k, v in space.items() if k != "count"}
    if "type" in space:
        return space
    return {name: _drop_count(value) for name, value in space.items()}


def forwards(apps, schema_editor):
    Experiment = apps.get_model("registry", "Experiment")
    for experiment in Experiment.objects.only("id", "config").iterator():
        config = experiment.config
        storage = config.get("checkpoint_storage")
        changed = False
        if isinstance(storage, dict) and any(key in storage for key in _RETENTION):
            config["checkpoint_storage"] = {
                k: v for k, v in storage.items() if k not in _RETENTION
            }
            changed = True
        hparams = config.get("hyperparameters")
        if isinstance(hparams, dict):
            cleaned = {name: _drop_count(value) for name, value in hparams.items()}
            if cleaned != hparams:
                config["hyperparameters"] = cleaned
                changed = True
        if changed:
            experiment.save(update_fields=["config"])


class Migration(migrations.Migration):
    dependencies = [("registry", "0001_initial")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
