"""Drop the metric tables' single-column foreign-key indexes: each is the prefix of a unique
index the table has anyway, and costs one more insert and WAL record per stored row.

Only the indexes are dropped (``DROP INDEX IF EXISTS``, the same names on SQLite and
PostgreSQL). Django's own ``AlterField(db_index=False)`` would rebuild each table on SQLite and,
on PostgreSQL, drop and re-validate the foreign key, reading every row: minutes on a store of
tens of millions of points. ``SeparateDatabaseAndState`` records the field change without that.
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, field, the model it points to, index name as Django created it in 0001)
_INDEXES = [
    ("metricbucket", "series", "registry.metricseries", "registry_metricbucket_series_id_6b412018"),
    ("metricreport", "trial", "registry.trial", "registry_metricreport_trial_id_671361f4"),
    ("metricseries", "trial", "registry.trial", "registry_metricseries_trial_id_255afdd8"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0015_slurm_jobs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX "{index}" ON "registry_{model}" ("{field}_id")',
                )
                for model, field, _to, index in _INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name=field,
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=to,
                    ),
                )
                for model, field, to, _index in _INDEXES
            ],
        ),
    ]
