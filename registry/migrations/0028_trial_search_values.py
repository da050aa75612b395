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
-- The primary key carries the values: sorting trials by a metric joins each trial's row of
-- that key from the index alone (registry.search.order).
ALTER TABLE registry_trialsearchvalue
    DROP CONSTRAINT registry_trialsearchvalue_pkey,
    ADD CONSTRAINT registry_trialsearchvalue_pkey PRIMARY KEY (trial_id, key) INCLUDE (num, text);

-- A JSON number as a double, or NULL beyond what a double holds (1e400, 1e-400: a cast would
-- raise "out of range" and fail the trial's own INSERT or UPDATE).
CREATE OR REPLACE FUNCTION registry_json_double(value jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN jsonb_typeof(value) = 'number'
                 AND abs(value::numeric) <= 1e308
                 AND (value::numeric = 0 OR abs(value::numeric) >= 1e-307)
                THEN value::double precision END
$fn$;

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
           registry_json_double(value),
           (CASE jsonb_typeof(value)
                WHEN 'string' THEN left(value #>> '{}', 300)
                WHEN 'boolean' THEN value::text END)::varchar
    FROM flat
    WHERE jsonb_typeof(value) IN ('number', 'string', 'boolean') AND length(path) <= 297
$fn$;

-- Only the validation group: what filters name by default, reported rarely. Training
-- summaries change at every report batch, the metric store's hot path; leaving them out lets
-- the update trigger's WHEN skip those statements (training.<name> filters read the JSON).
CREATE OR REPLACE FUNCTION registry_metric_values(summary jsonb)
RETURNS TABLE (key varchar, num double precision)
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT k::varchar,
           registry_json_double(s.value -> 'last')
    FROM jsonb_each(CASE WHEN jsonb_typeof(summary -> 'validation') = 'object'
                         THEN summary -> 'validation' ELSE '{}'::jsonb END) s,
         LATERAL (SELECT 'm:validation:' || s.key AS k) named
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
    IF (NEW.summary_metrics -> 'validation') IS DISTINCT FROM (OLD.summary_metrics -> 'validation')
    THEN
        -- One pass over the new validation summary writes only the series whose latest value
        -- changed (looked up in the old one); the old one is walked again only to find series
        -- that are gone, which is rare (a rebuilt step range).
        INSERT INTO registry_trialsearchvalue (trial_id, key, num)
        SELECT NEW.id, n.key, n.num
        FROM registry_metric_values(NEW.summary_metrics) n
        WHERE (OLD.summary_metrics -> 'validation' -> substr(n.key, 14) -> 'last')
              IS DISTINCT FROM (NEW.summary_metrics -> 'validation' -> substr(n.key, 14) -> 'last')
        ON CONFLICT (trial_id, key) DO UPDATE SET num = EXCLUDED.num;
        IF EXISTS (
            SELECT 1 FROM registry_metric_values(OLD.summary_metrics) o
            WHERE NOT coalesce((NEW.summary_metrics -> 'validation') ? substr(o.key, 14), false)
        ) THEN
            DELETE FROM registry_trialsearchvalue
            WHERE trial_id = NEW.id AND starts_with(key, 'm:') AND key NOT IN (
                SELECT m.key FROM registry_metric_values(NEW.summary_metrics) m);
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;

-- `labels contains "k"` on trials is `labels ? 'k'`: jsonb_ops (not jsonb_path_ops) serves `?`.
CREATE INDEX trial_label_keys ON registry_trial USING gin (labels);

CREATE TRIGGER registry_trial_search_values_insert
AFTER INSERT ON registry_trial
FOR EACH ROW EXECUTE FUNCTION registry_trial_search_values();

-- The WHEN is evaluated without calling the function: a training report's update (the
-- metric store's hot path) costs one comparison of the validation subtrees.
CREATE TRIGGER registry_trial_search_values
AFTER UPDATE OF hparams, summary_metrics ON registry_trial
FOR EACH ROW
WHEN (OLD.hparams IS DISTINCT FROM NEW.hparams
      OR (OLD.summary_metrics -> 'validation') IS DISTINCT FROM (NEW.summary_metrics -> 'validation'))
EXECUTE FUNCTION registry_trial_search_values();

INSERT INTO registry_trialsearchvalue (trial_id, key, num, text)
SELECT t.id, v.key, v.num, v.text FROM registry_trial t, registry_hparam_values(t.hparams) v
UNION ALL
SELECT t.id, m.key, m.num, NULL FROM registry_trial t, registry_metric_values(t.summary_metrics) m;
"""

DROP = """
DROP INDEX IF EXISTS trial_label_keys;
DROP TRIGGER IF EXISTS registry_trial_search_values ON registry_trial;
DROP TRIGGER IF EXISTS registry_trial_search_values_insert ON registry_trial;
DROP FUNCTION IF EXISTS registry_trial_search_values();
DROP FUNCTION IF EXISTS registry_metric_values(jsonb);
DROP FUNCTION IF EXISTS registry_hparam_values(jsonb);
DROP FUNCTION IF EXISTS registry_json_double(jsonb);
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
                        related_name="search_values",
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
        migrations.AddIndex(
            model_name="trial",
            index=models.Index(
                fields=["id"], include=["experiment", "state"], name="trial_list_cover"
            ),
        ),
    ]
