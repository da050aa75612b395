# The filter language's side table (registry.models.search_value): one row per hyperparameter
# and per metric series' latest value of each trial, kept by triggers on registry_trial so that
# every writer (the metric store's one statement, bulk inserts, MLflow params) keeps it current.
# PostgreSQL only: elsewhere (the embedded SQLite) the filter reads the JSON columns.

import django.db.models.deletion
from django.db import migrations, models

# The flattening, shared by the trigger and the backfill below. Nested hyperparameters are
# dotted ({"optim": {"lr": 1}} -> hp:optim.lr); lists are not searchable. Keys over 300
# characters are left out and strings are cut to 300 (a btree entry must stay under ~2.7 kB).
FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION registry_hparam_values(hparams jsonb)
RETURNS TABLE (key varchar, num double precision, text varchar)
LANGUAGE sql IMMUTABLE AS $fn$
    WITH RECURSIVE flat(path, value) AS (
        SELECT e.key, e.value FROM jsonb_each(
            CASE WHEN jsonb_typeof(hparams) = 'object' THEN hparams ELSE '{}'::jsonb END) e
        UNION ALL
        SELECT flat.path || '.' || e.key, e.value
        FROM flat, jsonb_each(flat.value) e
        WHERE jsonb_typeof(flat.value) = 'object'
    )
    SELECT ('hp:' || path)::varchar,
           CASE jsonb_typeof(value) WHEN 'number' THEN value::double precision END,
           (CASE jsonb_typeof(value)
                WHEN 'string' THEN left(value #>> '{}', 300)
                WHEN 'boolean' THEN value::text END)::varchar
    FROM flat
    WHERE jsonb_typeof(value) IN ('number', 'string', 'boolean') AND length(path) <= 297
$fn$;

CREATE OR REPLACE FUNCTION registry_metric_values(summary jsonb)
RETURNS TABLE (key varchar, num double precision)
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT k::varchar,
           CASE jsonb_typeof(s.value -> 'last') WHEN 'number'
               THEN (s.value -> 'last')::double precision END
    FROM jsonb_each(CASE WHEN jsonb_typeof(summary) = 'object' THEN summary
                         ELSE '{}'::jsonb END) g,
         jsonb_each(CASE WHEN jsonb_typeof(g.value) = 'object' THEN g.value
                         ELSE '{}'::jsonb END) s,
         LATERAL (SELECT 'm:' || g.key || ':' || s.key AS k) named
    WHERE length(k) <= 300
$fn$;

CREATE OR REPLACE FUNCTION registry_trial_search_values() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO registry_trialsearchvalue (trial_id, key, num, text)
        SELECT NEW.id, v.key, v.num, v.text FROM registry_hparam_values(NEW.hparams) v
        UNION ALL
        SELECT NEW.id, m.key, m.num, NULL FROM registry_metric_values(NEW.summary_metrics) m;
        RETURN NULL;
    END IF;
    IF NEW.hparams IS DISTINCT FROM OLD.hparams THEN
        DELETE FROM registry_trialsearchvalue
        WHERE trial_id = NEW.id AND starts_with(key, 'hp:');
        INSERT INTO registry_trialsearchvalue (trial_id, key, num, text)
        SELECT NEW.id, v.key, v.num, v.text FROM registry_hparam_values(NEW.hparams) v;
    END IF;
    IF NEW.summary_metrics IS DISTINCT FROM OLD.summary_metrics THEN
        -- Only the series whose latest value changed are written: a report batch touches a
        -- few of a trial's series.
        INSERT INTO registry_trialsearchvalue (trial_id, key, num)
        SELECT NEW.id, n.key, n.num
        FROM registry_metric_values(NEW.summary_metrics) n
        LEFT JOIN registry_metric_values(OLD.summary_metrics) o ON o.key = n.key
        WHERE o.key IS NULL OR o.num IS DISTINCT FROM n.num
        ON CONFLICT (trial_id, key) DO UPDATE SET num = EXCLUDED.num;
        DELETE FROM registry_trialsearchvalue
        WHERE trial_id = NEW.id AND key IN (
            SELECT o.key FROM registry_metric_values(OLD.summary_metrics) o
            EXCEPT SELECT n.key FROM registry_metric_values(NEW.summary_metrics) n);
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER registry_trial_search_values
AFTER INSERT OR UPDATE OF hparams, summary_metrics ON registry_trial
FOR EACH ROW EXECUTE FUNCTION registry_trial_search_values();

INSERT INTO registry_trialsearchvalue (trial_id, key, num, text)
SELECT t.id, v.key, v.num, v.text FROM registry_trial t, registry_hparam_values(t.hparams) v
UNION ALL
SELECT t.id, m.key, m.num, NULL FROM registry_trial t, registry_metric_values(t.summary_metrics) m;
"""

DROP = """
DROP TRIGGER IF EXISTS registry_trial_search_values ON registry_trial;
DROP FUNCTION IF EXISTS registry_trial_search_values();
DROP FUNCTION IF EXISTS registry_metric_values(jsonb);
DROP FUNCTION IF EXISTS registry_hparam_values(jsonb);
"""


def _create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTIONS)


def _drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0027_workspaces_projects"),
    ]

    operations = [
        migrations.CreateModel(
            name="TrialSearchValue",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "trial",
                        "key",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("key", models.CharField(max_length=300)),
                ("num", models.FloatField(null=True)),
                ("text", models.CharField(max_length=300, null=True)),
                (
                    "trial",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="registry.trial",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("num__isnull", False)),
                        fields=["key", "num", "trial"],
                        name="search_value_num",
                    ),
                    models.Index(
                        condition=models.Q(("text__isnull", False)),
                        fields=["key", "text", "trial"],
                        name="search_value_text",
                    ),
                ],
            },
        ),
        migrations.RunPython(_create_triggers, _drop_triggers, elidable=False),
    ]
