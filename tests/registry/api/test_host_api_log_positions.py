"""A resent log batch is stored once: a line's ``position`` in the run's output is its
idempotency key (registry/lifecycle/_log_batches.py), per run and per share; a line without
one (a client before positions, the agent's own notes) is stored as sent."""

from __future__ import annotations

import pytest

from headway.client import BadRequestError
from registry import lifecycle
from registry.models import TrialLog, TrialRun
from tests.helpers import TINY_CONFIG, TINY_MODEL, reload
from tests.host_api_helpers import host_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(live_server, django_user_model):
    """A host's client and the ids of a run placed on it and claimed."""
    owner = django_user_model.objects.create_user("log-positions-owner")
    api = host_api(live_server, "hx-logs")
    experiment = lifecycle.experiment_create(
        owner=owner, config_source=TINY_CONFIG, model_definition=TINY_MODEL
    )
    trial = experiment.trials.get()
    ids = (trial.id, reload(trial).run_id)
    assert api.run_claim(*ids, worker="hx-logs:1").claimed
    return api, trial, ids


def _stored(trial) -> list[str]:
    return list(
        TrialLog.objects.filter(trial=trial).order_by("id").values_list("message", flat=True)
    )


def test_a_batch_sent_twice_is_stored_once(running) -> None:
    api, trial, ids = running
    batch = [("a", None, 2), ("b", None, 4), ("c", None, 9)]
    assert api.run_logs(*ids, batch).accepted == 3
    assert api.run_logs(*ids, batch).accepted == 0  # its answer was lost: sent again
    assert _stored(trial) == ["a", "b", "c"]
    assert TrialRun.objects.get(trial=trial, run_id=ids[1]).log_position == 9


def test_an_overlapping_resend_stores_only_its_new_tail(running) -> None:
    api, trial, ids = running
    api.run_logs(*ids, [("a", None, 10), ("b", None, 20)])
    # A restarted agent re-reads from an older offset: its stored prefix is skipped; its own
    # note (no position) is stored.
    resent = [("[note]", None, None), ("a", None, 10), ("b", None, 20), ("c", None, 30)]
    assert api.run_logs(*ids, resent).accepted == 2
    assert _stored(trial) == ["a", "b", "[note]", "c"]


def test_lines_without_positions_are_stored_as_sent(running) -> None:
    api, trial, ids = running
    assert api.run_logs(*ids, ["old", ("client", None)]).accepted == 2
    assert api.run_logs(*ids, ["old", ("client", None)]).accepted == 2
    assert _stored(trial) == ["old", "client", "old", "client"]
    assert api.run_logs(*ids, [("new", None, 1)]).accepted == 1


def test_a_share_keeps_its_own_mark(live_server, running) -> None:
    """The chief's positions do not hide a share's lines (scoped per run and node_rank)."""
    api, trial, ids = running
    api.run_logs(*ids, [("chief", None, 5)])
    run = TrialRun.objects.get(trial=trial, run_id=ids[1])
    run.shares.create(node_rank=1, host=run.host)
    assert api.share_logs(*ids, 1, [("node 1", None, 5)]).accepted == 1
    assert api.share_logs(*ids, 1, [("node 1", None, 5)]).accepted == 0
    assert _stored(trial) == ["chief", "node 1"]


@pytest.mark.parametrize(
    "line",
    [
        {"message": "x", "position": 0},
        {"message": "x", "position": -3},
        {"message": "x", "position": "seven"},
        {"message": "x", "position": 1.5},
        {"message": "x", "position": 2**63},
    ],
)
def test_a_bad_position_is_refused_naming_the_field(running, line) -> None:
    api, trial, ids = running
    with pytest.raises(BadRequestError) as refused:
        api.session.post(f"host-agent/trials/{ids[0]}/runs/{ids[1]}/logs/", json={"lines": [line]})
    assert "lines.0.position" in str(refused.value)
    assert _stored(trial) == []


def test_a_line_out_of_order_in_a_batch_is_taken_for_a_resent_one(running) -> None:
    api, trial, ids = running
    batch = [("a", None, 5), ("note", None, None), ("a again", None, 5), ("b", None, 7)]
    assert api.run_logs(*ids, batch).accepted == 3
    assert _stored(trial) == ["a", "note", "b"]
