"""The experiment page's trials table as rendered by the server (``_trials.html``): one cell of
hyperparameters, the legend's data in the trials JSON (not on the rows), the best trial marked, numbers through ``sig4``,
and no control form: a row's menu is fetched when opened (``dashboard.views.trial.trial_menu``)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from registry.models import State
from tests.helpers_hparams import hparam_search, search_with_system_metrics

pytestmark = pytest.mark.django_db

TRIALS = 60  # search_with_system_metrics: 50 rows on page 1, 10 on page 2


def test_rows_carry_the_legend_data_and_no_live_forms(client_alice, alice):
    experiment, trials = hparam_search(alice, 4, name="table-4")
    trials[0].state = State.ACTIVE  # pause / cancel / kill forms for this row
    trials[0].save(update_fields=["state"])
    html = client_alice.get(f"/experiments/{experiment.id}/").content.decode()
    table = html[html.index('<div id="trials">') :]
    assert 'class="legend-search"' in table and 'class="legend-color-by"' in table

    rows = table[table.index("<tbody>") :].split("</table>")[0]
    assert "<form" not in rows  # the row menus are fetched on demand
    menu_url = reverse("dashboard:trial-menu", args=[trials[0].id])
    assert f'data-menu-url="{menu_url}"' in table
    menu = client_alice.get(menu_url)
    assert menu.status_code == 200 and 'data-action="pause"' in menu.content.decode()
    assert client_alice.get(reverse("dashboard:trial-menu", args=[999999])).status_code == 404

    data = client_alice.get(reverse("dashboard:experiment-trials-data", args=[experiment.id]))
    by_id = {row["id"]: row for row in data.json()["trials"]}
    assert "data-hparams" not in table
    for trial in trials:
        trial.refresh_from_db()
        assert re.search(rf'<tr id="trial-{trial.id}"[^>]*>', table) is not None
        decoded = by_id[trial.id]["hparams"]
        assert decoded["optimizer"] == trial.hparams["optimizer"]
        assert decoded["layers.width"] == trial.hparams["layers"]["width"]
        assert by_id[trial.id]["value"] == trial.best_validation
    best = max(trials, key=lambda t: t.best_validation)
    assert re.search(rf'<tr id="trial-{best.id}"[^>]*class="best-trial"', table)
    # Hyperparameters in one cell, numbers to 4 significant digits with the exact value.
    lr = trials[1].hparams["lr"]
    assert f'<span class="hp-key">lr</span>=<span class="num" title="{lr!r}"' in table


def test_the_server_pages_sorts_and_exports_the_table(
    client_alice, alice, django_assert_max_num_queries
):
    experiment, trials = search_with_system_metrics(alice)
    client = client_alice
    with django_assert_max_num_queries(14):  # 12 + the column names and the saved views
        html = client.get(reverse("dashboard:experiment", args=[experiment.id])).content.decode()
    assert len(re.findall(r'<tr id="trial-\d+"', html)) == 50
    assert "data-hparams" not in html and 'id="hparam-data"' not in html
    second = client.get(reverse("dashboard:experiment", args=[experiment.id]), {"page": 2})
    rows = re.findall(r'<tr id="trial-(\d+)"', second.content.decode())
    assert len(rows) == TRIALS - 50
    # Sorted on the server: by id, then reversed.
    by_id = client.get(reverse("dashboard:experiment-trials", args=[experiment.id]), {"sort": "id"})
    ids = [int(i) for i in re.findall(r'<tr id="trial-(\d+)"', by_id.content.decode())]
    assert ids == sorted(t.id for t in trials)[:50]
    desc = client.get(reverse("dashboard:experiment-trials", args=[experiment.id]), {"sort": "-id"})
    ids = [int(i) for i in re.findall(r'<tr id="trial-(\d+)"', desc.content.decode())]
    assert ids == sorted((t.id for t in trials), reverse=True)[:50]

    # The live poll re-renders the page it is told.
    live = client.get(reverse("dashboard:experiment-live", args=[experiment.id]), {"page": 2})
    assert len(re.findall(r'<tr id="trial-\d+"', live.json()["trials_html"])) == TRIALS - 50
    assert live.json()["trial_count"] == TRIALS
    # The trials JSON: every trial, in id order.
    with django_assert_max_num_queries(6):
        data = client.get(reverse("dashboard:experiment-trials-data", args=[experiment.id]))
    assert [t["id"] for t in data.json()["trials"]] == sorted(t.id for t in trials)

    # CSV: a header and every trial, whatever the page.
    response = client.get(reverse("dashboard:experiment-trials-csv", args=[experiment.id]))
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0][:5] == ["trial_id", "state", "batches", "restarts", "best_validation"]
    assert "hp.optimizer" in table[0] and "hp.layers.width" in table[0]
    assert sorted(int(r[0]) for r in table[1:]) == sorted(t.id for t in trials)
    best = max(trials, key=lambda t: t.best_validation)  # larger is better: the default sort
    assert int(table[1][0]) == best.id and float(table[1][4]) == best.best_validation
