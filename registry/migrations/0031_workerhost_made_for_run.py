"""A host its pool made for one run says which run (``WorkerHost.made_for_run``) instead of
naming one pool type's job (``slurm_job``): general code asks "made for a run?" without naming
a pool type. The link is copied over (the job's run) before the old column goes."""

import django.db.models.deletion
from django.db import migrations, models


def _forwards(apps, schema_editor):
    WorkerHost = apps.get_model("registry", "WorkerHost")
    for host_id, run_id in WorkerHost.objects.filter(slurm_job__isnull=False).values_list(
        "id", "slurm_job__run_id"
    ):
        WorkerHost.objects.filter(id=host_id).update(made_for_run_id=run_id)


def _backwards(apps, schema_editor):
    WorkerHost = apps.get_model("registry", "WorkerHost")
    SlurmJob = apps.get_model("registry", "SlurmJob")
    jobs = dict(SlurmJob.objects.values_list("run_id", "id"))
    for host_id, run_id in WorkerHost.objects.filter(made_for_run__isnull=False).values_list(
        "id", "made_for_run_id"
    ):
        WorkerHost.objects.filter(id=host_id).update(slurm_job_id=jobs.get(run_id))


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0030_model_workspaces"),
    ]

    operations = [
        migrations.AddField(
            model_name="workerhost",
            name="made_for_run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="pool_hosts",
                to="registry.trialrun",
            ),
        ),
        migrations.RunPython(_forwards, _backwards),
        migrations.RemoveField(
            model_name="workerhost",
            name="slurm_job",
        ),
    ]
