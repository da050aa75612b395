"""Runs lost before their ranks started: the trial's count in a row and the run's back-off."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0016_metric_indexes_from_unique_prefixes"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="lost_before_start",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="trialrun",
            name="not_before",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
