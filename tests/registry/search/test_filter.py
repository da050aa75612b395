"""The filter language against PostgreSQL: each operator on each kind of field, for trials and
for experiments, through ``registry.search.filter_queryset`` (the REST lists' code path)."""

import pytest

from registry.errors import InvalidInput
from registry.models import Experiment, Trial, TrialSearchValue
from registry.search import Target, filter_queryset, order_queryset

pytestmark = pytest.mark.django_db


def trials(world, text):
    return world.names(filter_queryset(Trial.objects.all(), text, Target.TRIAL))


def experiments(world, text):
    return world.names(filter_queryset(Experiment.objects.all(), text, Target.EXPERIMENT))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # metrics: bare names and metrics.<name> are the latest validation value
        ("accuracy > 0.95", ["t1", "t3"]),
        ("metrics.accuracy >= 0.96", ["t1", "t3"]),
        ("validation.accuracy < 0.96", ["t2"]),
        ("accuracy <= 0.9", ["t2"]),
        ("accuracy = 0.97", ["t1"]),
        ("accuracy != 0.97", ["t2", "t3"]),  # t4 has no accuracy: it matches no comparison
        ("accuracy in (0.9, 0.96)", ["t2", "t3"]),
        ("accuracy not in (0.9, 0.96)", ["t1"]),
        ("accuracy is null", ["t4"]),
        ("accuracy exists", ["t1", "t2", "t3"]),
        ("training.loss < 0.2", ["t1"]),
        ("training.loss >= 0.2", ["t2"]),  # t4's training loss is NaN (the JSON path)
        ("training.loss is null", ["t3"]),
        ("best_validation > 0.95", ["t1", "t3"]),
        ("best_validation is null", ["t4"]),
        # hyperparameters: numbers, strings, booleans, nested names
        ("hparams.lr < 1e-3", ["t1", "t3"]),
        ("hparams.lr >= 0.0005", ["t1", "t2"]),
        ("hparams.lr = 0.01", ["t2"]),
        ('hparams.lr = "auto"', ["t4"]),
        ("hparams.lr != 0.01", ["t1", "t3", "t4"]),
        ('hparams.optimizer = "adam"', ["t1", "t3"]),
        ("hparams.optimizer = adam", ["t1", "t3"]),
        ('hparams.optimizer != "adam"', ["t2"]),
        ('hparams.optimizer in ("sgd", "rmsprop")', ["t2"]),
        ('hparams.optimizer not in ("sgd")', ["t1", "t3"]),
        ('hparams.optimizer contains "DA"', ["t1", "t3"]),
        ("hparams.layers in (2, 4)", ["t1", "t2"]),
        ("hparams.bn = true", ["t1"]),
        ("hparams.bn = false", ["t2"]),
        ("hparams.optim.momentum > 0.5", ["t1"]),
        ("hparams.layers is null", ["t3", "t4"]),
        ("hparams.layers exists", ["t1", "t2"]),
        # columns
        ("state = COMPLETED", ["t1"]),
        ("state = completed", ["t1"]),
        ("state != COMPLETED", ["t2", "t3", "t4"]),
        ("state in (ERROR, CANCELED)", ["t2", "t4"]),
        ("state not in (ERROR, CANCELED)", ["t1", "t3"]),
        ("owner = alice", ["t1", "t2"]),
        ('owner != "alice"', ["t3", "t4"]),
        ("owner in (bob)", ["t3", "t4"]),
        ('owner contains "OB"', ["t3", "t4"]),
        ('experiment_name = "bert"', ["t3", "t4"]),
        ('project = "Uncategorized"', ["t1", "t2", "t3", "t4"]),
        ('workspace = "Uncategorized"', ["t1", "t2", "t3", "t4"]),
        ("steps_completed > 100", ["t1", "t2"]),
        ("steps_completed <= 50", ["t3", "t4"]),
        ("steps_completed in (0, 50)", ["t3", "t4"]),
        ("restarts = 0", ["t1", "t2", "t3", "t4"]),
        # labels of a trial: contains a key; labels.<key> its value
        ('labels contains "team"', ["t1", "t2"]),
        ('labels contains "baseline"', ["t1"]),
        ('labels.team = "vision"', ["t1"]),
        ('labels.team contains "vision"', ["t1", "t2"]),
        ('labels.team != "vision"', ["t2"]),
        ('labels.team in ("vision-2", "x")', ["t2"]),
        ("labels.team is null", ["t3", "t4"]),
        # dates: a date alone is its whole UTC day
        ("start_time >= 2026-11-01", ["t3", "t4"]),
        ("start_time > 2026-11-02", ["t4"]),
        ("start_time < 2026-10-16", ["t1", "t2"]),
        ("start_time <= 2026-10-15", ["t1", "t2"]),
        ("start_time = 2026-10-15", ["t1", "t2"]),
        ("start_time != 2026-10-15", ["t3", "t4"]),
        ("start_time in (2026-11-02, 2026-11-03)", ["t3", "t4"]),
        ("start_time > 2026-10-15T12:00:00Z", ["t2", "t3", "t4"]),
        ("start_time = 2026-11-02T10:00:00+00:00", ["t3"]),
        ("end_time is null", ["t3"]),
        ("end_time is not null", ["t1", "t2", "t4"]),
        ("end_time < 2026-10-16T05:00Z", ["t2"]),
        # ids
        ("id > 0", ["t1", "t2", "t3", "t4"]),
    ],
)
def test_each_operator_on_each_trial_field(world, text, expected):
    assert trials(world, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("accuracy > 0.95 and hparams.lr < 1e-3", ["t1", "t3"]),
        ("accuracy > 0.95 and hparams.lr < 1e-3 and owner = bob", ["t3"]),
        ("state = COMPLETED or state in (ERROR, CANCELED)", ["t1", "t2", "t4"]),
        # and before or: t4 (CANCELED, no accuracy) matches through the or alone
        ("state = CANCELED or accuracy > 0.96 and owner = alice", ["t1", "t4"]),
        ("(state = CANCELED or accuracy > 0.96) and owner = alice", ["t1"]),
        # not is the complement: trials without the hparam match it too
        ('not (hparams.optimizer = "adam")', ["t2", "t4"]),
        ("not accuracy > 0.95", ["t2", "t4"]),
        ("not not accuracy > 0.95", ["t1", "t3"]),
        ('NOT (state = COMPLETED OR hparams.optimizer = "adam")', ["t2", "t4"]),
        # Under or / not, hyperparameters and metrics are read from the JSON columns: the
        # same answers, a string "auto" never passing a numeric comparison.
        ("hparams.lr < 1e-3 or state = ERROR", ["t1", "t2", "t3"]),
        ("hparams.lr >= 0 or accuracy > 2", ["t1", "t2", "t3"]),
        ("hparams.lr != 0.01 or state = ERROR", ["t1", "t2", "t3", "t4"]),
        ("hparams.layers not in (2) or accuracy < 0", ["t1"]),
        ('hparams.optimizer contains "DA" or accuracy < 0', ["t1", "t3"]),
        ("hparams.bn = false or accuracy < 0", ["t2"]),
        ("hparams.optim.momentum > 0.5 or accuracy < 0", ["t1"]),
        ("hparams.layers is null or accuracy < 0", ["t3", "t4"]),
        ("not (accuracy exists)", ["t4"]),
        ("not (hparams.lr < 1e-3)", ["t2", "t4"]),
    ],
)
def test_and_or_not_combine_with_the_usual_precedence(world, text, expected):
    assert trials(world, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name = "bert"', ["nlp"]),
        ('name contains "RESNET"', ["vision"]),
        ('description contains "imagenet"', ["vision"]),
        ("id > 0", ["nlp", "vision"]),
        ("state = ACTIVE", ["nlp"]),
        ("owner = alice", ["vision"]),
        ('labels contains "baseline"', ["vision"]),
        ('labels contains "nlp"', ["nlp"]),
        ("archived = true", ["nlp"]),
        ("archived != true", ["vision"]),
        ("start_time >= 2026-11-01", ["nlp"]),
        ("end_time is null", ["nlp"]),
        ("best_validation > 0.9", ["vision"]),
        # trial fields: the experiment has a trial that matches
        ("accuracy > 0.96", ["vision"]),
        ("accuracy > 0.95", ["nlp", "vision"]),
        ('hparams.lr = "auto"', ["nlp"]),
        ("steps_completed >= 1000", ["vision"]),
        ('labels.team = "vision"', ["vision"]),
        # one trial must match the whole trial-only part: no trial has both
        ("accuracy > 0.96 and hparams.lr < 0.0003", []),
        ("accuracy > 0.95 and hparams.lr < 0.0003", ["nlp"]),
        # an experiment field with a trial part
        ("owner = alice and accuracy > 0.95", ["vision"]),
        ("owner = bob or accuracy > 0.96", ["nlp", "vision"]),
        ("not accuracy > 0.5", ["nlp"]),  # t4 has no accuracy
    ],
)
def test_experiments_match_their_own_fields_and_any_trial(world, text, expected):
    assert experiments(world, text) == expected


@pytest.mark.parametrize(
    ("text", "target", "words"),
    [
        ("hparam.lr < 1", Target.TRIAL, ["`hparam.lr`", "Unknown field"]),
        ("hparams. < 1", Target.TRIAL, ["`hparams.`", "Unknown field"]),
        ("state > 3", Target.TRIAL, ["`state`", "does not take `>`"]),
        ("state = RUNNINGISH", Target.TRIAL, ["`state`", "no state"]),
        ('accuracy > "high"', Target.TRIAL, ["`accuracy`", "numbers"]),
        ('hparams.lr < "a"', Target.TRIAL, ["`hparams.lr`", "numbers"]),
        ("hparams.lr contains 3", Target.TRIAL, ["`hparams.lr`", "string"]),
        ("start_time > 5", Target.TRIAL, ["`start_time`", "dates"]),
        ("steps_completed > abc", Target.TRIAL, ["`steps_completed`", "numbers"]),
        ("owner < alice", Target.TRIAL, ["`owner`", "does not take"]),
        ("owner = true", Target.TRIAL, ["`owner`", "strings"]),
        ("labels = x", Target.TRIAL, ["`labels`", "contains"]),
        ("labels.team = true", Target.TRIAL, ["`labels.team`", "strings"]),
        ("archived = 1", Target.EXPERIMENT, ["`archived`", "true or false"]),
        ("archived = true", Target.TRIAL, ["`archived`"]),
        ("name = x", Target.TRIAL, ["`name`"]),
        ("a >", Target.TRIAL, ["At position 4", "a value"]),
    ],
)
def test_mistakes_are_a_400_naming_filter_and_the_field(world, text, target, words):
    model = Trial if target is Target.TRIAL else Experiment
    with pytest.raises(InvalidInput) as caught:
        list(filter_queryset(model.objects.all(), text, target))
    [message] = caught.value.errors["filter"]
    assert all(word in message for word in words), message


def test_the_side_table_follows_every_write_of_hparams_and_summaries(world):
    t1 = world.trials["t1"]
    keys = lambda: dict(  # noqa: E731
        TrialSearchValue.objects.filter(trial=t1).values_list("key", "num")
    )
    assert keys()["m:validation:accuracy"] == 0.97 and keys()["hp:optim.momentum"] == 0.9
    # The metric store writes with UPDATE statements; a queryset update is one too.
    Trial.objects.filter(id=t1.id).update(
        summary_metrics={"validation": {"accuracy": {"last": 0.5}, "f1": {"last": "NaN"}}},
        hparams={"lr": 0.2},
    )
    assert keys() == {"m:validation:accuracy": 0.5, "m:validation:f1": None, "hp:lr": 0.2}
    assert trials(world, "accuracy > 0.95") == ["t3"]
    assert trials(world, "f1 exists and hparams.lr = 0.2") == ["t1"]
    Trial.objects.filter(id=t1.id).delete()
    assert not TrialSearchValue.objects.filter(trial_id=t1.id).exists()


def test_the_json_columns_answer_as_the_side_table_does(world):
    """The scan used where there are no triggers (SQLite) and as the benchmark's baseline."""
    from registry.search.compile import to_q
    from registry.search.grammar import parse

    for text in (
        "accuracy > 0.95",
        "hparams.layers in (2, 4)",
        "hparams.optimizer = adam",
        "training.loss < 0.2 or hparams.optim.momentum > 0.5",
        "accuracy is null",
    ):
        indexed = Trial.objects.filter(to_q(parse(text), Target.TRIAL, indexed=True))
        scanned = Trial.objects.filter(to_q(parse(text), Target.TRIAL, indexed=False))
        assert world.names(indexed) == world.names(scanned), text


@pytest.mark.parametrize(
    ("order_by", "expected"),
    [
        ("-accuracy", ["t1", "t3", "t2", "t4"]),
        ("accuracy", ["t2", "t3", "t1", "t4"]),
        ("hparams.lr", ["t3", "t1", "t2", "t4"]),
        ("-hparams.lr", ["t2", "t1", "t3", "t4"]),
        ("owner,-steps_completed", ["t1", "t2", "t3", "t4"]),
        ("-start_time", ["t4", "t3", "t2", "t1"]),
        ("state, -hparams.layers", ["t3", "t4", "t1", "t2"]),
    ],
)
def test_order_by_sorts_by_columns_metrics_and_hparams_missing_last(world, order_by, expected):
    ordered = order_queryset(Trial.objects.all(), order_by)
    assert [world.by_id[t.id] for t in ordered] == expected


@pytest.mark.parametrize("order_by", ["labels", "hparam.lr", "-", "a,b,c,d,e,f"])
def test_order_by_refuses_what_does_not_sort(world, order_by):
    with pytest.raises(InvalidInput) as caught:
        list(order_queryset(Trial.objects.all(), order_by))
    assert "order_by" in caught.value.errors
