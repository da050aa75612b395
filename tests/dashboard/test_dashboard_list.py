"""The experiment list page: columns, filters, sort, archived toggle, pages, bulk controls.

Django test client against the real database; the bulk controls go through the real
``registry.lifecycle`` functions.
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard.filters import SORT_FIELDS
from dashboard.views.experiments import MAX_BULK_EXPERIMENTS
from registry.lifecycle import experiment_create
from registry.models import Experiment, State, Trial
from tests.helpers import DASHBOARD_CONFIG, make_tar_gz

pytestmark = pytest.mark.django_db

LIST = "/"
BULK = "/experiments/bulk"
CONFIG = (
    "name: bulk\nentrypoint: python train.py\nhyperparameters: {lr: 0.1}\n"
    "searcher: {name: single, metric: loss, max_length: 10}\n"
)


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", password="pw-bob")


def _config(searcher: str = "single", metric: str = "validation_accuracy") -> dict:
    config = {**DASHBOARD_CONFIG, "searcher": dict(DASHBOARD_CONFIG["searcher"])}
    config["searcher"].update(name=searcher, metric=metric)
    return config


def _experiment(owner, name: str, **fields) -> Experiment:
    trial_states = fields.pop("trial_states", [])
    searcher = fields.pop("searcher", "single")
    fields.setdefault("config", _config(searcher))
    exp = Experiment.objects.create(owner=owner, name=name, model_definition=b"", **fields)
    Trial.objects.bulk_create(Trial(experiment=exp, state=state) for state in trial_states)
    return exp


@pytest.fixture
def fleet(alice, bob) -> dict[str, Experiment]:
    """Four experiments of two owners in various states; one archived."""
    start = timezone.now() - timedelta(hours=5)
    return {
        "mnist": _experiment(
            alice,
            "mnist-mlp",
            labels=["baseline", "mnist"],
            best_validation=0.91,
            progress=0.5,
            created_at=start,
            searcher="random",
            trial_states=[State.ACTIVE, State.ACTIVE, State.PAUSED, State.COMPLETED],
        ),
        "cifar": _experiment(
            bob,
            "cifar-resnet",
            labels=["cifar"],
            state=State.PAUSED,
            best_validation=0.75,
            progress=0.2,
            created_at=start + timedelta(hours=1),
            searcher="grid",
            trial_states=[State.PAUSED],
        ),
        "done": _experiment(
            alice,
            "MNIST-done",
            labels=["Baseline"],
            state=State.COMPLETED,
            best_validation=0.95,
            progress=1.0,
            created_at=start + timedelta(hours=2),
            ended_at=start + timedelta(hours=4),
            trial_states=[State.COMPLETED, State.COMPLETED],
        ),
        "old": _experiment(
            bob,
            "old-archived",
            state=State.CANCELED,
            archived=True,
            created_at=start - timedelta(days=3),
            ended_at=start - timedelta(days=2),
        ),
    }


def _ids(response) -> list[int]:
    """Experiment ids of the list's rows, in page order."""
    assert response.status_code == 200
    return [int(i) for i in re.findall(r'data-experiment="(\d+)"', response.content.decode())]


def _messages(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


def test_it_shows_every_column(client_alice, fleet):
    response = client_alice.get(LIST)
    html = response.content.decode()
    mnist = fleet["mnist"]
    row = html[html.index(f'data-experiment="{mnist.id}"') :]
    row = row[: row.index("</tr>")]
    assert f">{mnist.id}</td>" in row
    assert reverse("dashboard:experiment", args=[mnist.id]) in row and "mnist-mlp" in row
    assert '<span class="label">baseline</span>' in row
    assert 'class="badge state-active">ACTIVE</span>' in row  # text, not colour alone
    assert "50%" in row
    assert "<td>random</td>" in row
    assert "2 / 4" in row  # ACTIVE trials / all trials
    assert "0.91" in row and "validation_accuracy" in row
    assert mnist.created_at.strftime("%Y-%m-%d") in row
    assert "5\xa0hours" in row and "so far" in row
    assert "<td>alice</td>" in row
    done = html[html.index(f'data-experiment="{fleet["done"].id}"') :]
    assert "2\xa0hours" in done[: done.index("</tr>")]  # ended: ended_at - created_at
    # Every column header is a sort link with a name; every checkbox is labelled.
    for _, title in SORT_FIELDS.values():
        assert f'aria-label="{title}, sort ascending"' in html
    assert f'aria-label="Select experiment {mnist.id} (mnist-mlp)"' in html


def test_archived_are_hidden_unless_asked(client_alice, fleet):
    shown = _ids(client_alice.get(LIST))
    assert fleet["old"].id not in shown and len(shown) == 3
    everything = _ids(client_alice.get(LIST, {"archived": "on"}))
    assert fleet["old"].id in everything and len(everything) == 4
    page = client_alice.get(LIST, {"archived": "on"}).content.decode()
    assert 'name="archived" id="id_archived" checked' in page
    assert '<span class="badge">archived</span>' in page


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"state": "PAUSED"}, ["cifar"]),
        ({"state": "CANCELED", "archived": "on"}, ["old"]),
        ({"owner": "alice"}, ["done", "mnist"]),
        ({"owner": "bob", "archived": "on"}, ["old", "cifar"]),
        ({"name": "mnist"}, ["done", "mnist"]),  # case-insensitive substring
        ({"label": "baseline"}, ["mnist"]),
        ({"label": "cifar", "owner": "bob"}, ["cifar"]),
        ({"label": "nope"}, []),
    ],
)
def test_filters(client_alice, fleet, params, expected):
    assert _ids(client_alice.get(LIST, params)) == [fleet[key].id for key in expected]


def test_an_invalid_filter_is_reported_and_ignored(client_alice, fleet):
    response = client_alice.get(LIST, {"state": "SLEEPING", "owner": "alice"})
    assert _ids(response) == [fleet["done"].id, fleet["mnist"].id]
    assert "SLEEPING is not one of the available choices" in response.content.decode()


def test_no_match_says_so(client_alice, fleet):
    html = client_alice.get(LIST, {"name": "zzz"}).content.decode()
    assert "No experiments match these filters" in html


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("id", ["mnist", "cifar", "done"]),
        ("-id", ["done", "cifar", "mnist"]),
        ("name", ["cifar", "done", "mnist"]),  # case-insensitive: "MNIST-done" < "mnist-mlp"
        ("labels", ["done", "mnist", "cifar"]),  # first label, case-insensitive; ties: newest
        ("state", ["mnist", "done", "cifar"]),
        ("progress", ["cifar", "mnist", "done"]),
        ("-progress", ["done", "mnist", "cifar"]),
        ("searcher", ["cifar", "mnist", "done"]),
        ("trials", ["cifar", "done", "mnist"]),
        ("-trials", ["mnist", "done", "cifar"]),
        ("best", ["done", "mnist", "cifar"]),  # larger is better: best value first
        ("-best", ["cifar", "mnist", "done"]),
        ("started", ["mnist", "cifar", "done"]),
        ("duration", ["done", "cifar", "mnist"]),
        ("owner", ["done", "mnist", "cifar"]),  # alice (newest first among equals), then bob
    ],
)
def test_sort_by_any_column(client_alice, fleet, sort, expected):
    ids = _ids(client_alice.get(LIST, {"sort": sort}))
    assert ids == [fleet[key].id for key in expected]


def test_no_best_value_sorts_last_both_ways(client_alice, fleet, alice):
    empty = _experiment(alice, "no-best", state=State.COMPLETED)
    assert _ids(client_alice.get(LIST, {"sort": "best"}))[-1] == empty.id
    assert _ids(client_alice.get(LIST, {"sort": "-best"}))[-1] == empty.id


def test_sort_headers_toggle_and_keep_filters(client_alice, fleet):
    html = client_alice.get(LIST, {"owner": "alice", "sort": "best", "page": "1"}).content.decode()
    assert html.count('aria-sort="ascending"') == 1  # only the sorted column
    best = re.search(r'aria-sort="ascending"><a href="([^"]+)"', html)
    assert best is not None
    query = parse_qs(urlsplit(best.group(1).replace("&amp;", "&")).query)
    assert query == {"owner": ["alice"], "sort": ["-best"]}  # toggled, filter kept, page dropped
    assert "Best value &#9650;" in html or "Best value \u25b2" in html
    # The filter form keeps the sort when filters change.
    assert '<input type="hidden" name="sort" value="best">' in html


def test_pagination_links_keep_filters_and_sort(client_alice, alice, monkeypatch):
    monkeypatch.setattr("dashboard.views.experiments.EXPERIMENTS_PER_PAGE", 2)
    made = [_experiment(alice, f"exp-{i}", progress=i / 10) for i in range(5)]
    _experiment(alice, "other")
    params = {"name": "exp-", "sort": "-progress"}
    first = client_alice.get(LIST, params)
    assert _ids(first) == [made[4].id, made[3].id]
    html = first.content.decode()
    assert "page 1 of 3" in html
    [next_url] = re.findall(r'<a href="([^"]+)" rel="next"', html)
    query = parse_qs(urlsplit(next_url.replace("&amp;", "&")).query)
    assert query == {"name": ["exp-"], "sort": ["-progress"], "page": ["2"]}
    second = client_alice.get(LIST, {**params, "page": "2"})
    assert _ids(second) == [made[2].id, made[1].id]
    [prev_url] = re.findall(r'<a href="([^"]+)" rel="prev"', second.content.decode())
    assert parse_qs(urlsplit(prev_url.replace("&amp;", "&")).query)["sort"] == ["-progress"]
    last = client_alice.get(LIST, {**params, "page": "99"})  # out of range: the last page
    assert _ids(last) == [made[0].id]


def test_login_required(client, fleet):
    response = client.get(LIST)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    response = client.post(BULK, {"action": "pause", "experiment": [fleet["mnist"].id]})
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert Experiment.objects.get(id=fleet["mnist"].id).state == State.ACTIVE


def test_bulk_needs_csrf_and_post(alice, fleet):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post(BULK, {"action": "pause", "experiment": [fleet["mnist"].id]})
    assert response.status_code == 403
    assert Experiment.objects.get(id=fleet["mnist"].id).state == State.ACTIVE
    assert strict.get(BULK).status_code == 405
    # The list's form carries the token, and posting it works.
    html = strict.get(LIST).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    assert f'action="{BULK}"' in html
    response = strict.post(
        BULK,
        {"action": "archive", "experiment": [fleet["done"].id], "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert Experiment.objects.get(id=fleet["done"].id).archived


@pytest.fixture
def real(alice) -> list[Experiment]:
    """Two real single-trial experiments (their runs stay QUEUED: no worker claims them)."""
    archive = make_tar_gz({"train.py": "print('hi')\n"})
    return [
        experiment_create(owner=alice, config_source=CONFIG, model_definition=archive)
        for _ in range(2)
    ]


def test_bulk_pause_activate_cancel_archive(client_alice, real):
    a, b = real
    ids = [a.id, b.id]
    query = "owner=alice&sort=-id"
    response = client_alice.post(
        BULK, {"action": "pause", "experiment": ids, "query": query}, follow=True
    )
    [(url, status)] = response.redirect_chain
    assert status == 302 and url == f"{LIST}?{query}"  # back to the list, filters kept
    assert _messages(response) == [
        ("success", f"Pause: experiment {a.id}: PAUSED, experiment {b.id}: PAUSED")
    ]
    assert {e.state for e in Experiment.objects.filter(id__in=ids)} == {State.PAUSED}
    assert {t.state for t in Trial.objects.filter(experiment_id__in=ids)} == {State.PAUSED}

    client_alice.post(BULK, {"action": "activate", "experiment": [a.id]})
    assert Experiment.objects.get(id=a.id).state == State.ACTIVE

    # Runs that never started end at once: CANCELED.
    response = client_alice.post(BULK, {"action": "cancel", "experiment": ids}, follow=True)
    assert response.redirect_chain == [(LIST, 302)]
    states = {e.state for e in Experiment.objects.filter(id__in=ids)}
    assert states <= {State.CANCELED, State.STOPPING_CANCELED}
    if states == {State.CANCELED}:
        client_alice.post(BULK, {"action": "archive", "experiment": ids})
        assert all(e.archived for e in Experiment.objects.filter(id__in=ids))
        assert _ids(client_alice.get(LIST)) == []


def test_an_illegal_bulk_action_says_why_and_changes_the_rest(client_alice, fleet, real):
    active = real[0]
    done = fleet["done"]
    response = client_alice.post(
        BULK, {"action": "pause", "experiment": [done.id, active.id, 987654]}, follow=True
    )
    # One note per experiment not changed (in id order), then one for those changed.
    assert _messages(response) == [
        (
            "error",
            f"Experiment {done.id} not paused: experiment {done.id} is COMPLETED; "
            "it can be paused only when ACTIVE",
        ),
        ("error", "Experiment 987654 not found."),
        ("success", f"Pause: experiment {active.id}: PAUSED"),
    ]
    assert "it can be paused only when ACTIVE" in response.content.decode()
    assert Experiment.objects.get(id=done.id).state == State.COMPLETED
    assert Experiment.objects.get(id=active.id).state == State.PAUSED
    # Archiving a running experiment is refused the same way.
    response = client_alice.post(
        BULK, {"action": "archive", "experiment": [active.id]}, follow=True
    )
    [(level, text)] = _messages(response)
    assert level == "error" and "can be archived only when COMPLETED" in text
    assert not Experiment.objects.get(id=active.id).archived


def test_bulk_rejects_bad_input(client_alice, real):
    mnist = real[0].id
    assert client_alice.post(BULK, {"action": "kill", "experiment": [mnist]}).status_code == 400
    assert client_alice.post(BULK, {"action": "pause", "experiment": ["x"]}).status_code == 400
    too_many = list(range(1, MAX_BULK_EXPERIMENTS + 2))
    assert client_alice.post(BULK, {"action": "pause", "experiment": too_many}).status_code == 400
    response = client_alice.post(BULK, {"action": "pause", "query": "name=x"}, follow=True)
    assert response.redirect_chain == [(f"{LIST}?name=x", 302)]
    assert _messages(response) == [("warning", "Tick at least one experiment to pause.")]
    # Only a query string travels: the redirect cannot leave the list page.
    response = client_alice.post(
        BULK, {"action": "pause", "query": "https://evil.example/", "experiment": [mnist]}
    )
    assert response["Location"].startswith(f"{LIST}?")
    assert Experiment.objects.get(id=mnist).state == State.PAUSED


def _many(owner, n: int) -> None:
    for i in range(n):
        _experiment(
            owner,
            f"exp-{i}",
            labels=[f"l{i}"],
            best_validation=i / n,
            trial_states=[State.ACTIVE, State.PAUSED, State.COMPLETED],
        )


@pytest.mark.parametrize("count", [3, 30])
@pytest.mark.parametrize(
    "params", [{}, {"owner": "alice", "state": "ACTIVE", "label": "l1", "sort": "-trials"}]
)
def test_query_count_is_bounded(
    client_alice, alice, bob, django_assert_max_num_queries, count, params
):
    _many(alice, count)
    _many(bob, count)
    # Session, user, the user's workspace roles (2), owner choices, owner lookup (when
    # filtered), count, rows, saved views: 9 whatever the number of experiments and trials.
    with django_assert_max_num_queries(9):
        response = client_alice.get(LIST, params)
    assert response.status_code == 200
    if not params:
        assert len(_ids(response)) == min(2 * count, 50)
