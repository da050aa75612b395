"""``headway trial list --filter`` and ``headway experiment list --filter`` against a real
registry (pytest-django's live server) holding the search tests' experiments."""

from __future__ import annotations

import json

import pytest

from headway.cli.main import main
from tests.registry.search.conftest import world  # noqa: F401 (the fixture)


@pytest.fixture
def server(live_server, transactional_db, api, monkeypatch, tmp_path):
    """The live server's URL, $HEADWAY_TOKEN set to alice's token."""
    monkeypatch.setenv("HEADWAY_TOKEN", api.token)
    monkeypatch.setenv("HEADWAY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWAY_MASTER", raising=False)
    return live_server.url


def _cli(server, capsys, *argv):
    code = main(["--master", server, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_trial_list_filters_sorts_and_shows_metrics(server, world, capsys):  # noqa: F811
    code, out, err = _cli(
        server,
        capsys,
        *("trial", "list", "--filter", "accuracy > 0.95 and hparams.lr < 1e-3"),
        # The = form: argparse would take a separate "-accuracy" for an option.
        *("--order-by=-accuracy", "--metric", "accuracy"),
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    ids = [int(line.split()[0]) for line in lines[2:-1]]
    assert ids == [world.trials["t1"].id, world.trials["t3"].id]
    assert "0.97" in lines[2] and "lr=0.0005" in lines[2]
    assert lines[-1] == "2 of 2 trials"


def test_trial_list_pages_and_prints_json(server, world, capsys):  # noqa: F811
    code, out, err = _cli(
        server,
        capsys,
        "trial",
        "list",
        "--experiment",
        str(world.vision.id),
        "--limit",
        "1",
        "--json",
    )
    assert code == 0, err
    page = json.loads(out)
    assert page["count"] == 2 and [t["id"] for t in page["results"]] == [world.trials["t1"].id]
    code, out, _ = _cli(server, capsys, "trial", "list", "--limit", "1")
    assert out.strip().splitlines()[-1] == "1 of 4 trials (more: --offset 1)"


def test_experiment_list_filters(server, world, capsys):  # noqa: F811
    code, out, err = _cli(
        server, capsys, "experiment", "list", "--all", "--filter", 'labels contains "nlp"'
    )
    assert code == 0, err
    rows = out.strip().splitlines()[2:]
    assert [int(row.split()[0]) for row in rows] == [world.nlp.id]


@pytest.mark.parametrize(
    ("order_by", "first"), [("name", "nlp"), ("-name", "vision"), ("-start_time", "nlp")]
)
def test_experiment_list_sorts_by_order_by(server, world, capsys, order_by, first):  # noqa: F811
    code, out, err = _cli(server, capsys, "experiment", "list", "--all", f"--order-by={order_by}")
    assert code == 0, err
    ids = [int(row.split()[0]) for row in out.strip().splitlines()[2:]]
    expected = [world.vision.id, world.nlp.id]
    assert ids == (expected if first == "vision" else expected[::-1])


def test_a_bad_experiment_order_by_is_an_error_naming_it(server, world, capsys):  # noqa: F811
    code, _out, err = _cli(server, capsys, "experiment", "list", "--order-by", "hparams.lr")
    assert code == 1 and "order_by" in err and "`hparams.lr`" in err, err


def test_a_bad_filter_is_an_error_naming_filter(server, world, capsys):  # noqa: F811
    code, _out, err = _cli(server, capsys, "trial", "list", "--filter", "hparam.lr < 1")
    assert code == 1 and "filter" in err and "`hparam.lr`" in err, err
