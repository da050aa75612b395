"""``Experiment.notes`` and ``Trial.notes``: Markdown notes edited in the dashboard or by PATCH."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0008_checkpoint_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="notes",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="trial",
            name="notes",
            field=models.TextField(blank=True, default=""),
        ),
    ]
