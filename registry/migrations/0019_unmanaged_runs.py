"""Unmanaged experiments, trials and runs (``headway.experimental.core_v2``): the flag and
external ids on experiments and trials, and the heartbeat table of unmanaged runs."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0018_component_beats"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="unmanaged",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="experiment",
            name="external_id",
            field=models.CharField(blank=True, default="", max_length=256),
        ),
        migrations.AddField(
            model_name="trial",
            name="external_id",
            field=models.CharField(blank=True, default="", max_length=256),
        ),
        migrations.AddConstraint(
            model_name="experiment",
            constraint=models.UniqueConstraint(
                condition=models.Q(("external_id", ""), _negated=True),
                fields=("owner", "external_id"),
                name="unique_external_experiment_per_owner",
            ),
        ),
        migrations.AddConstraint(
            model_name="trial",
            constraint=models.UniqueConstraint(
                condition=models.Q(("external_id", ""), _negated=True),
                fields=("experiment", "external_id"),
                name="unique_external_trial_per_experiment",
            ),
        ),
        migrations.CreateModel(
            name="UnmanagedRun",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="unmanaged",
                        serialize=False,
                        to="registry.trialrun",
                    ),
                ),
                ("heartbeat_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["heartbeat_at"], name="registry_un_heartbe_06be36_idx")
                ],
            },
        ),
    ]
