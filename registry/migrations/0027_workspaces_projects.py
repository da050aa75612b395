# Workspaces and projects (Determined 0.38's names): every experiment moves into the default
# project "Uncategorized" of the default workspace "Uncategorized", made here.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import registry.models.workspace

DEFAULT_NAME = "Uncategorized"


def _into_default_project(apps, schema_editor):
    # The historical models, not registry.models.workspace.default_project(): a later change
    # to the real models must not break this step on a fresh database.
    workspace_model = apps.get_model("registry", "Workspace")
    project_model = apps.get_model("registry", "Project")
    experiment_model = apps.get_model("registry", "Experiment")
    workspace, _ = workspace_model.objects.get_or_create(
        name=DEFAULT_NAME, defaults={"immutable": True}
    )
    project, _ = project_model.objects.get_or_create(
        workspace=workspace, name=DEFAULT_NAME, defaults={"immutable": True}
    )
    experiment_model.objects.filter(project__isnull=True).update(project=project)
    if schema_editor.connection.vendor == "postgresql":
        # The new foreign key is checked at commit (DEFERRABLE INITIALLY DEFERRED); its pending
        # checks would make the ALTER TABLE below fail ("pending trigger events"). Check now.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0026_model_aliases"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Workspace",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=128, unique=True)),
                ("archived", models.BooleanField(default=False)),
                ("immutable", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Project",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=128)),
                ("description", models.TextField(blank=True, default="")),
                ("archived", models.BooleanField(default=False)),
                ("immutable", models.BooleanField(default=False)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="projects",
                        to="registry.workspace",
                    ),
                ),
            ],
            options={
                "ordering": ["workspace__name", "name"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workspace", "name"), name="unique_project_name"
                    )
                ],
            },
        ),
        # Nullable first, filled, then NOT NULL: the model's default (a callable reading the
        # real models) is added last, where no existing row needs it.
        migrations.AddField(
            model_name="experiment",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="experiments",
                to="registry.project",
            ),
        ),
        migrations.RunPython(_into_default_project, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="experiment",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="experiments",
                to="registry.project",
            ),
        ),
        migrations.AlterField(
            model_name="experiment",
            name="project",
            field=models.ForeignKey(
                default=registry.models.workspace.default_project_id,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="experiments",
                to="registry.project",
            ),
        ),
    ]
