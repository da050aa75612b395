"""``Experiment.delete_error``: why deleting an experiment failed (state DELETE_FAILED)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0007_model_registry_and_deletion"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="delete_error",
            field=models.TextField(blank=True, default=""),
        ),
    ]
