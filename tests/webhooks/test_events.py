"""Events are recorded as deliveries in the transaction of the change that causes them (the
outbox), by the registry's own lifecycle and model registry functions; bodies and Slack shape;
webhooks filtered to a workspace."""

from __future__ import annotations

import json

import pytest
from django.db import transaction

from registry import lifecycle, model_aliases, model_registry, workspaces
from registry.models import Experiment, State, Workspace
from tests.helpers import queued_experiment, register_checkpoint
from webhooks.events import record
from webhooks.models import Delivery, EventType, Webhook

pytestmark = pytest.mark.django_db

ALL = [choice.value for choice in EventType]
TINY_CONFIG = "name: tiny\nentrypoint: python train.py\nsearcher: {name: single, metric: loss, max_length: 10}\n"


def _hook(name: str = "ops", events: list[str] | None = None, **fields) -> Webhook:
    return Webhook.objects.create(
        name=name,
        url="https://hooks.example.com/headway",
        events=ALL if events is None else events,
        secret="s" * 32,
        **fields,
    )


def _events(kind: str) -> list[dict]:
    return [json.loads(d.body) for d in Delivery.objects.filter(event_type=kind).order_by("id")]


def test_creating_an_experiment_records_no_state_change(user):
    _hook()
    queued_experiment(user, TINY_CONFIG)
    assert not Delivery.objects.exists()


def test_pausing_records_the_experiment_and_trial_state_changes(user):
    hook = _hook()
    experiment = queued_experiment(user, TINY_CONFIG)
    trial = experiment.trials.get()

    lifecycle.experiment_pause(experiment_id=experiment.id)

    (exp_event,) = _events(EventType.EXPERIMENT_STATE_CHANGED)
    assert exp_event["type"] == "experiment.state_changed"
    assert exp_event["data"]["experiment"] == {
        "id": experiment.id,
        "name": "tiny",
        "owner": "alice",
    }
    assert (exp_event["data"]["previous_state"], exp_event["data"]["state"]) == ("ACTIVE", "PAUSED")
    assert exp_event["data"]["url"].endswith(f"/experiments/{experiment.id}/")
    (trial_event,) = _events(EventType.TRIAL_STATE_CHANGED)
    assert trial_event["data"]["trial"] == {"id": trial.id, "experiment_id": experiment.id}
    assert (trial_event["data"]["previous_state"], trial_event["data"]["state"]) == (
        "ACTIVE",
        "PAUSED",
    )
    row = Delivery.objects.get(event_type=EventType.EXPERIMENT_STATE_CHANGED)
    assert (row.webhook_id, row.state, row.attempts) == (hook.id, "PENDING", 0)
    assert str(row.event_id) == exp_event["id"]


def test_a_rolled_back_change_records_no_event(user):
    _hook()
    experiment = queued_experiment(user, TINY_CONFIG)
    with pytest.raises(RuntimeError), transaction.atomic():
        lifecycle.experiment_pause(experiment_id=experiment.id)
        assert Delivery.objects.count() == 2  # experiment and trial, inside the transaction
        raise RuntimeError("the change fails after its event was written")
    assert Experiment.objects.get(id=experiment.id).state == State.ACTIVE
    assert not Delivery.objects.exists()


def test_a_no_op_control_records_nothing(user):
    _hook()
    experiment = queued_experiment(user, TINY_CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    count = Delivery.objects.count()
    lifecycle.experiment_pause(experiment_id=experiment.id)  # PAUSED: a no-op
    assert Delivery.objects.count() == count


def test_only_subscribed_enabled_webhooks_get_an_event(user):
    wants = _hook("trials", events=[EventType.TRIAL_STATE_CHANGED])
    _hook("models", events=[EventType.MODEL_VERSION_CREATED])
    _hook("off", enabled=False)
    experiment = queued_experiment(user, TINY_CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    assert [(d.webhook_id, d.event_type) for d in Delivery.objects.all()] == [
        (wants.id, "trial.state_changed")
    ]


def test_checkpoint_model_version_and_alias_events(user):
    _hook()
    trial = queued_experiment(user, TINY_CONFIG).trials.get()
    checkpoint = register_checkpoint(trial, steps_completed=40, size=123)
    (event,) = _events(EventType.CHECKPOINT_COMPLETED)
    assert event["data"]["checkpoint"] == {
        "uuid": str(checkpoint.uuid),
        "trial_id": trial.id,
        "experiment_id": trial.experiment_id,
        "steps_completed": 40,
        "size": 123,
    }
    model = model_registry.model_create(owner=user, name="digits")
    model_registry.version_register(model=model, user=user, checkpoint_uuid=checkpoint.uuid)
    model_registry.version_register(model=model, user=user, checkpoint_uuid=checkpoint.uuid)
    created = _events(EventType.MODEL_VERSION_CREATED)
    assert [(e["data"]["model"], e["data"]["version"]) for e in created] == [
        ("digits", 1),
        ("digits", 2),
    ]
    assert created[0]["data"]["checkpoint_uuid"] == str(checkpoint.uuid)
    model_aliases.alias_set(model=model, alias="champion", version=1, user=user)
    model_aliases.alias_set(model=model, alias="champion", version=1, user=user)  # no move
    model_aliases.alias_set(model=model, alias="champion", version=2, user=user)
    moved = [e["data"] for e in _events(EventType.MODEL_ALIAS_MOVED)]
    assert [(m["action"], m["from_version"], m["to_version"]) for m in moved] == [
        ("SET", None, 1),
        ("MOVE", 1, 2),
    ]
    assert moved[0]["alias"] == "champion"
    model_aliases.alias_delete(model=model, alias="champion", user=user)
    assert len(_events(EventType.MODEL_ALIAS_MOVED)) == 2  # a deletion is not a move


def test_slack_format_is_an_incoming_webhook_message(user):
    _hook("slack", format="slack")
    experiment = queued_experiment(user, TINY_CONFIG)
    lifecycle.experiment_pause(experiment_id=experiment.id)
    body = json.loads(Delivery.objects.get(event_type=EventType.EXPERIMENT_STATE_CHANGED).body)
    assert list(body) == ["text"]
    assert body["text"].startswith("<http")
    assert f"|Experiment {experiment.id} (tiny)>: ACTIVE → *PAUSED*" in body["text"]


def test_every_event_type_has_a_slack_message(user):
    _hook("slack", format="slack")
    experiment = queued_experiment(user, TINY_CONFIG)
    trial = experiment.trials.get()
    lifecycle.experiment_pause(experiment_id=experiment.id)
    checkpoint = register_checkpoint(trial, steps_completed=40, size=123)
    model = model_registry.model_create(owner=user, name="digits")
    model_registry.version_register(model=model, user=user, checkpoint_uuid=checkpoint.uuid)
    model_registry.version_register(model=model, user=user, checkpoint_uuid=checkpoint.uuid)
    model_aliases.alias_set(model=model, alias="champion", version=1, user=user)
    model_aliases.alias_set(model=model, alias="champion", version=2, user=user)
    texts = {(d.event_type, json.loads(d.body)["text"]) for d in Delivery.objects.order_by("id")}
    assert {kind for kind, _ in texts} == set(ALL)
    expected = [
        f"|Trial {trial.id} of experiment {experiment.id}>: ACTIVE → *PAUSED*",
        f"Checkpoint `{checkpoint.uuid}` of <",
        "completed at step 40 (123 bytes)",
        "Version 2 of <",
        f"|model digits> registered (checkpoint `{checkpoint.uuid}`)",
        "|digits>@champion → version 1",
        "|digits>@champion → version 2 (was version 1)",
    ]
    for fragment in expected:
        assert any(fragment in text for _, text in texts), (fragment, texts)


def test_slack_text_escapes_names(user):
    _hook("slack", format="slack", events=[EventType.EXPERIMENT_STATE_CHANGED])
    experiment = queued_experiment(user, TINY_CONFIG.replace("name: tiny", "name: a <b> & c"))
    lifecycle.experiment_pause(experiment_id=experiment.id)
    (text,) = [json.loads(d.body)["text"] for d in Delivery.objects.all()]
    assert f"|Experiment {experiment.id} (a &lt;b&gt; &amp; c)>" in text


def _in_workspace(owner, workspace: str) -> Experiment:
    """A queued experiment in project ``p`` of a new workspace ``workspace``."""
    made = workspaces.workspace_create(owner=owner, name=workspace)
    workspaces.project_create(owner=owner, workspace_id=made.id, name="p")
    config = TINY_CONFIG + f"workspace: {workspace}\nproject: p\n"
    return queued_experiment(owner, config)


def test_a_workspace_filter_lets_through_that_workspaces_events_only(user):
    everything = _hook("all")
    experiment_a = _in_workspace(user, "A")
    experiment_b = _in_workspace(user, "B")
    only_a = _hook("only-a", workspace=Workspace.objects.get(name="A"))
    trial_a, trial_b = experiment_a.trials.get(), experiment_b.trials.get()

    lifecycle.experiment_pause(experiment_id=experiment_a.id)
    lifecycle.experiment_pause(experiment_id=experiment_b.id)
    checkpoint_a = register_checkpoint(trial_a)
    register_checkpoint(trial_b)

    def got(hook: Webhook) -> set[tuple[str, int]]:
        rows = Delivery.objects.filter(webhook=hook)
        seen = set()
        for row in rows:
            data = json.loads(row.body)["data"]
            if row.event_type == EventType.EXPERIMENT_STATE_CHANGED:
                seen.add((row.event_type, data["experiment"]["id"]))
            elif row.event_type == EventType.TRIAL_STATE_CHANGED:
                seen.add((row.event_type, data["trial"]["experiment_id"]))
            else:
                seen.add((row.event_type, data["checkpoint"]["experiment_id"]))
        return seen

    kinds = ("experiment.state_changed", "trial.state_changed", "checkpoint.completed")
    assert got(only_a) == {(kind, experiment_a.id) for kind in kinds}
    assert got(everything) == {(k, e.id) for k in kinds for e in (experiment_a, experiment_b)}

    # A model's events belong to the model's workspace: one in A reaches only_a, one in the
    # default workspace only the unfiltered webhook.
    for name, place in (("digits", "A"), ("elsewhere", None)):
        model = model_registry.model_create(owner=user, name=name, workspace=place)
        model_registry.version_register(model=model, user=user, checkpoint_uuid=checkpoint_a.uuid)
        model_aliases.alias_set(model=model, alias="champion", version=1, user=user)
    for kind in (EventType.MODEL_VERSION_CREATED, EventType.MODEL_ALIAS_MOVED):
        assert Delivery.objects.filter(event_type=kind, webhook=everything).count() == 2
        to_a = Delivery.objects.filter(event_type=kind, webhook=only_a)
        assert [json.loads(row.body)["data"]["model"] for row in to_a] == ["digits"]


def test_an_event_nobody_filters_costs_one_query(user, django_assert_num_queries):
    _hook("all", events=[EventType.EXPERIMENT_STATE_CHANGED])
    with django_assert_num_queries(2):  # the webhooks, then the insert of the delivery
        record(EventType.EXPERIMENT_STATE_CHANGED, {"probe": 1}, send=False)
