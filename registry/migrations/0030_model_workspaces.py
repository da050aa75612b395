# Models move into workspaces: every existing model goes to the default workspace
# ("Uncategorized"), whose everyone_role (editor, set by 0029) keeps them readable by every
# logged-in user and changeable by their owner, as before.

import django.db.models.deletion
from django.db import migrations, models

import registry.models.workspace

DEFAULT_NAME = "Uncategorized"


def _into_default_workspace(apps, schema_editor):
    # The historical models, not registry.models.workspace.default_project(): a later change
    # to the real models must not break this step on a fresh database.
    workspace_model = apps.get_model("registry", "Workspace")
    project_model = apps.get_model("registry", "Project")
    model_model = apps.get_model("registry", "RegisteredModel")
    workspace, _ = workspace_model.objects.get_or_create(
        name=DEFAULT_NAME, defaults={"immutable": True, "everyone_role": "editor"}
    )
    project_model.objects.get_or_create(
        workspace=workspace, name=DEFAULT_NAME, defaults={"immutable": True}
    )
    model_model.objects.filter(workspace__isnull=True).update(workspace=workspace)
    if schema_editor.connection.vendor == "postgresql":
        # The new foreign key is checked at commit (DEFERRABLE INITIALLY DEFERRED); its pending
        # checks would make the ALTER TABLE below fail ("pending trigger events"). Check now.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0029_workspace_roles"),
    ]

    operations = [
        migrations.AddField(
            model_name="registeredmodel",
            name="workspace",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="models",
                to="registry.workspace",
            ),
        ),
        migrations.RunPython(_into_default_workspace, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="registeredmodel",
            name="workspace",
            field=models.ForeignKey(
                default=registry.models.workspace.default_workspace_id,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="models",
                to="registry.workspace",
            ),
        ),
    ]
