"""The dashboard's filter box, chosen columns and saved views, on real PostgreSQL: the trials
table and the experiment list filtered with the REST API's filter language (kept across pages,
sorts and the CSV; a malformed filter shown and ignored), metric and hyperparameter columns
sorted on the server, and views saved by one user and applied, but not deleted, by another."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from dashboard.models import SavedView
from dashboard.templatetags.numbers import sig4_text
from registry import workspaces
from tests.helpers_hparams import hparam_search

pytestmark = pytest.mark.django_db

ADAM = 'hparams.optimizer = "adam"'


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", password="pw-bob")


@pytest.fixture
def client_bob(bob):
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def search(alice):
    """A finished 60-trial random search (two pages of the table), half of it adam."""
    experiment, trials = hparam_search(alice, 60, name="filter-60")
    return experiment, trials


def _row_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr id="trial-(\d+)"', html)]


def _table(html: str) -> str:
    return html[html.index('<div id="trials">') :]


def test_the_filter_box_narrows_the_trials_table_and_follows_pages_sorts_and_csv(
    client_alice, search
):
    experiment, trials = search
    adam = sorted(t.id for t in trials if t.hparams["optimizer"] == "adam")
    assert len(adam) == 30
    url = reverse("dashboard:experiment", args=[experiment.id])
    html = _table(client_alice.get(url, {"filter": ADAM, "sort": "id"}).content.decode())
    assert _row_ids(html) == adam  # 30 rows: one page
    assert 'value="hparams.optimizer = &quot;adam&quot;"' in html  # the box keeps it
    assert 'data-filter="hparams.optimizer = &quot;adam&quot;"' in html
    assert "Download CSV (30 trials)" in html
    # Sort links and the CSV link keep the filter.
    encoded = "filter=hparams.optimizer+%3D+%22adam%22"
    assert re.search(rf'href="[^"]*\?{re.escape(encoded)}&amp;sort=-id#trials-heading"', html)
    assert f"trials.csv?{encoded}&amp;sort=id" in html

    # The fragment route pages a filter that matches all 60 trials, keeping it in the pager.
    wide = "validation_accuracy > 0"
    page2 = client_alice.get(
        reverse("dashboard:experiment-trials", args=[experiment.id]),
        {"filter": wide, "sort": "id", "page": "2"},
    ).content.decode()
    assert _row_ids(page2) == sorted(t.id for t in trials)[50:]
    assert "filter=validation_accuracy" in page2 and "page=1" in page2

    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(
                    client_alice.get(
                        reverse("dashboard:experiment-trials-csv", args=[experiment.id]),
                        {"filter": ADAM, "sort": "-id"},
                    ).streaming_content
                ).decode()
            )
        )
    )
    assert [int(r[0]) for r in rows[1:]] == sorted(adam, reverse=True)

    ids = client_alice.get(
        reverse("dashboard:experiment-trials-ids", args=[experiment.id]), {"filter": ADAM}
    )
    assert ids.status_code == 200 and ids.json() == {"ids": adam}
    everyone = client_alice.get(reverse("dashboard:experiment-trials-ids", args=[experiment.id]))
    assert everyone.json()["ids"] == sorted(t.id for t in trials)


def test_a_malformed_filter_is_shown_and_ignored_on_the_page_and_400_elsewhere(
    client_alice, search
):
    experiment, trials = search
    url = reverse("dashboard:experiment", args=[experiment.id])
    response = client_alice.get(url, {"filter": "validation_accuracy >", "sort": "id"})
    assert response.status_code == 200
    html = _table(response.content.decode())
    assert (
        "filter: At position 22: expected a value; found the end of the filter. (ignored)" in html
    )
    assert _row_ids(html) == sorted(t.id for t in trials)[:50]
    assert 'data-filter=""' in html  # the links and the saved view carry no broken filter
    unknown = _table(client_alice.get(url, {"filter": "hparam.lr > 1"}).content.decode())
    assert "filter: Unknown field `hparam.lr`" in unknown
    for route in ("dashboard:experiment-trials-csv", "dashboard:experiment-trials-ids"):
        bad = client_alice.get(reverse(route, args=[experiment.id]), {"filter": "lr >"})
        assert bad.status_code == 400 and list(bad.json()) == ["filter"]
        bad = client_alice.get(reverse(route, args=[experiment.id]), {"columns": "state"})
        assert bad.status_code == 400 and list(bad.json()) == ["columns"]
    long = client_alice.get(url, {"filter": "id > 1 and " * 300}).content.decode()
    assert "filter: At most 2000 characters. (ignored)" in long


def test_chosen_columns_show_four_digits_and_sort_on_the_server(client_alice, search):
    experiment, trials = search
    url = reverse("dashboard:experiment", args=[experiment.id])
    params = {"columns": "validation_loss,hparams.lr", "sort": "-validation_loss"}
    html = _table(client_alice.get(url, params).content.decode())
    by_loss = sorted(
        trials, key=lambda t: (-t.summary_metrics["validation"]["validation_loss"]["last"], t.id)
    )
    assert _row_ids(html) == [t.id for t in by_loss][:50]  # 50 rows only
    assert "<code>validation_loss</code>" in html and "<code>hparams.lr</code>" in html
    first = by_loss[0]
    loss = first.summary_metrics["validation"]["validation_loss"]["last"]
    row = html[html.index(f'<tr id="trial-{first.id}"') :].split("</tr>")[0]
    assert f">{sig4_text(loss)}</span></td>" in row
    assert f">{sig4_text(first.hparams['lr'])}</span></td>" in row
    # The sorted column's heading reverses; the other sorts keep the columns.
    assert 'aria-sort="descending" class="chosen-column"' in html
    assert "columns=validation_loss%2Chparams.lr&amp;sort=validation_loss" in html
    assert "columns=validation_loss%2Chparams.lr&amp;sort=id" in html
    # Removing a column drops it and its sort.
    assert (
        f'href="/experiments/{experiment.id}/?columns=hparams.lr&amp;sort=best#trials-heading"'
        in html
    )

    by_lr = client_alice.get(url, {"columns": "hparams.lr", "sort": "hparams.lr"}).content
    assert (
        _row_ids(_table(by_lr.decode()))
        == [t.id for t in sorted(trials, key=lambda t: (t.hparams["lr"], t.id))][:50]
    )
    # Repeated ?columns= (the Add column box) add up; a sort by a column not shown falls back.
    added = _table(
        client_alice.get(
            url, {"columns": ["validation_loss", "training.loss"], "sort": "hparams.dropout"}
        ).content.decode()
    )
    assert "<code>training.loss</code>" in added and 'data-sort="best"' in added
    bad = _table(client_alice.get(url, {"columns": "state,hparam.lr"}).content.decode())
    assert "columns: `state` is no metric or hyperparameter. (ignored)" in bad
    assert "columns: Unknown field `hparam.lr`" in bad
    # The Columns control offers the experiment's metrics and hyperparameters.
    assert '<option value="validation_loss">' in html and '<option value="hparams.lr">' in html
    csv_text = b"".join(
        client_alice.get(
            reverse("dashboard:experiment-trials-csv", args=[experiment.id]), params
        ).streaming_content
    ).decode()
    header, top = list(csv.reader(io.StringIO(csv_text)))[:2]
    assert header[-1] == "validation_loss" and float(top[-1]) == loss


def test_the_experiment_list_takes_the_filter_language(client_alice, alice):
    wide, _ = hparam_search(alice, 4, name="list-a")
    other, trials = hparam_search(alice, 2, name="list-b")
    best = max(t.best_validation for t in trials)
    html = client_alice.get("/", {"filter": 'name = "list-b"'}).content.decode()
    assert f'data-experiment="{other.id}"' in html and f'data-experiment="{wide.id}"' not in html
    # Trial fields match an experiment with at least one such trial.
    html = client_alice.get("/", {"filter": f"validation_accuracy >= {best!r}"}).content.decode()
    assert f'data-experiment="{other.id}"' in html
    bad = client_alice.get("/", {"filter": "name =", "sort": "id"})
    assert bad.status_code == 200
    text = bad.content.decode()
    assert "filter: At position 7: expected a value; found the end of the filter. (ignored)" in text
    assert f'data-experiment="{wide.id}"' in text and f'data-experiment="{other.id}"' in text


def test_saved_views_are_shared_with_readers_and_deleted_by_their_owner(
    client_alice, client_bob, alice, bob, search, admin_client
):
    experiment, trials = search
    save = reverse("dashboard:experiment-view-save", args=[experiment.id])
    response = client_alice.post(
        save,
        {
            "name": "adam by loss",
            "filter": ADAM,
            "sort": "validation_loss",
            "columns": "validation_loss",
        },
    )
    assert response.status_code == 302
    view = SavedView.objects.get()
    assert (view.owner, view.experiment, view.columns) == (alice, experiment, ["validation_loss"])
    assert response["Location"] == (f"/experiments/{experiment.id}/?{view.params}#trials-heading")
    # Saving the same name again replaces the owner's view.
    client_alice.post(save, {"name": "adam by loss", "filter": ADAM, "sort": "-id"})
    view.refresh_from_db()
    assert (view.sort, view.columns, SavedView.objects.count()) == ("-id", [], 1)

    # Bob reads the experiment (the default workspace): he sees and applies the view.
    page = client_bob.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    link = (
        f'href="/experiments/{experiment.id}/?{view.params.replace("&", "&amp;")}#trials-heading"'
    )
    assert link in page and 'adam by loss</a> <span class="muted">by alice</span>' in page
    assert f"/views/{view.id}/delete" not in page
    applied = client_bob.get(f"/experiments/{experiment.id}/?{view.params}").content.decode()
    assert _row_ids(_table(applied)) == sorted(
        (t.id for t in trials if t.hparams["optimizer"] == "adam"), reverse=True
    )
    delete = reverse("dashboard:view-delete", args=[view.id])
    assert client_bob.post(delete).status_code == 403
    assert SavedView.objects.filter(id=view.id).exists()
    assert admin_client.post(delete).status_code == 302  # a site admin may
    assert not SavedView.objects.exists()

    mine = SavedView.objects.create(owner=bob, experiment=experiment, name="bob's")
    assert client_bob.post(reverse("dashboard:view-delete", args=[mine.id])).status_code == 302
    assert not SavedView.objects.exists()


def test_saving_a_view_checks_every_field(client_alice, search):
    experiment, _ = search
    save = reverse("dashboard:experiment-view-save", args=[experiment.id])
    cases = [
        ({"name": " "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "v", "filter": "lr >"}, "filter"),
        ({"name": "v", "columns": "state"}, "columns"),
        ({"name": "v", "columns": "x" * 201, "sort": "x" * 201}, "columns"),
        ({"name": "v", "sort": "hparams.lr"}, "sort"),  # not a chosen column
        ({"name": "v", "sort": "nope"}, "sort"),
    ]
    for data, field in cases:
        response = client_alice.post(save, data)
        assert response.status_code == 400, data
        assert response.content.decode().startswith(f"{field}: "), response.content
    assert not SavedView.objects.exists()
    listed = client_alice.post(reverse("dashboard:list-view-save"), {"name": "v", "columns": "x"})
    assert listed.status_code == 400 and listed.content.startswith(b"columns: ")
    listed = client_alice.post(reverse("dashboard:list-view-save"), {"name": "v", "sort": "lr"})
    assert listed.status_code == 400 and listed.content.startswith(b"sort: ")


def test_views_of_the_experiment_list_are_seen_by_every_user(client_alice, client_bob, bob):
    response = client_alice.post(
        reverse("dashboard:list-view-save"),
        {"name": "finished", "filter": "state = COMPLETED", "sort": "-best"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/?filter=state+%3D+COMPLETED&sort=-best"
    view = SavedView.objects.get(experiment=None)
    page = client_bob.get("/").content.decode()
    assert 'href="/?filter=state+%3D+COMPLETED&amp;sort=-best"' in page and "finished" in page
    assert f"/views/{view.id}/delete" not in page
    assert f"/views/{view.id}/delete" in client_alice.get("/").content.decode()
    # The list's save form carries the applied filter and sort.
    form = client_bob.get("/", {"filter": "state = ACTIVE", "sort": "-id"}).content.decode()
    assert 'name="filter" value="state = ACTIVE"' in form and 'name="sort" value="-id"' in form


def test_a_view_of_an_experiment_nobody_may_read_is_a_404(client_bob, alice, search):
    experiment, _ = search
    workspace = workspaces.workspace_create(owner=alice, name="private-views")
    project = workspaces.project_create(owner=alice, workspace_id=workspace.id, name="p")
    experiment.project = project
    experiment.save(update_fields=["project"])
    view = SavedView.objects.create(owner=alice, experiment=experiment, name="secret view")
    save = reverse("dashboard:experiment-view-save", args=[experiment.id])
    assert client_bob.post(save, {"name": "mine"}).status_code == 404
    delete = reverse("dashboard:view-delete", args=[view.id])
    assert client_bob.post(delete).status_code == 404
    assert (
        client_bob.get(reverse("dashboard:experiment-trials-ids", args=[experiment.id])).status_code
        == 404
    )
    assert (
        SavedView.objects.count() == 1 and "secret view" not in client_bob.get("/").content.decode()
    )
