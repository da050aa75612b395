"""ComponentBeat: the master worker's last reaper pass, read by the health endpoint."""

from django.db import migrations, models


class Migration(migrations.Migration):
    # After both 0017 migrations (written at the same time on the same parent): depending on
    # each leaves one leaf whichever order they end up in.
    dependencies = [
        ("registry", "0017_host_operations"),
        ("registry", "0017_lost_before_start"),
    ]

    operations = [
        migrations.CreateModel(
            name="ComponentBeat",
            fields=[
                ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("beat_at", models.DateTimeField()),
            ],
        ),
    ]
