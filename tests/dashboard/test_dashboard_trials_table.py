"""The experiment page's trials table as rendered by the server (``_trials.html``): one cell of
hyperparameters, the legend's data in the trials JSON (not on the rows), the best trial marked, numbers through ``sig4``,
and no control form: a row's menu is fetched when opened (``dashboard.views.trial.trial_menu``)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from registry.models import State
from tests.helpers_hparams import hparam_search

pytestmark = pytest.mark.django_db


def test_rows_carry_the_legend_data_and_no_live_forms(client_alice, alice):
    experiment, trials = hparam_search(alice, 4, name="table-4")
    trials[0].state = State.ACTIVE  # pause / cancel / kill forms for this row
    trials[0].save(update_fields=["state"])
    html = client_alice.get(f"/experiments/{experiment.id}/").content.decode()
    table = html[html.index('<div id="trials">') :]
    assert 'class="legend-search"' in table and 'class="legend-color-by"' in table

    assert "<form" not in table.split("</table>")[0]  # the row menus are fetched on demand
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
