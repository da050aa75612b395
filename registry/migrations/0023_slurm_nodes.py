from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0022_host_failed_starts"),
    ]

    operations = [
        migrations.CreateModel(
            name="SlurmNode",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("namespace", models.CharField(default="", max_length=200)),
                ("pool", models.CharField(max_length=200)),
                ("name", models.CharField(max_length=200)),
                ("failed_starts", models.PositiveIntegerField(default=0)),
                ("excluded_reason", models.CharField(blank=True, default="", max_length=500)),
                ("excluded_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["pool", "name"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("namespace", "pool", "name"), name="slurm_node_unique_per_pool"
                    )
                ],
            },
        ),
    ]
