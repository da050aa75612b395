"""An unmanaged run's output as its trial's logs, against a live registry: what the script prints
is still printed and reaches ``GET trials/<id>/logs/``; a resent batch is stored once; lines
printed while the master is away are held and delivered; a managed trial ships nothing (its
agent does)."""

from __future__ import annotations

import logging
import sys

import pytest

from headway.client import APIError, MasterUnreachableError, RegistryAPI, Session
from headway.experimental import core_v2
from headway.experimental.core_v2._log_shipper import LogShipper, _Tee
from registry.models import TrialLog

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(unmanaged_client: RegistryAPI) -> RegistryAPI:
    """A user's client of the live registry (``unmanaged_client``)."""
    return unmanaged_client


@pytest.fixture(autouse=True)
def _closed(transactional_db, live_server):
    yield
    core_v2.close()


def _messages(client: RegistryAPI, trial_id: int) -> list[str]:
    """Every log line of the trial, oldest first (all pages)."""
    out: list[str] = []
    after = None
    while page := client.trial_logs(trial_id, after=after):
        out += [row["message"] for row in page]
        after = page[-1]["id"]
    return out


def test_printed_lines_become_the_trials_logs_and_are_still_printed(client, capsys) -> None:
    core_v2.init(config=core_v2.Config(name="printing"), client=client)
    assert core_v2.info is not None
    trial_id = core_v2.info.trial.trial_id
    assert isinstance(sys.stdout, _Tee) and isinstance(sys.stderr, _Tee)
    print("epoch 1: loss 0.5")
    print("a warning", file=sys.stderr)
    sys.stdout.write("two\nlines\n")
    sys.stdout.write("unended ")
    sys.stdout.write("last line")
    core_v2.close()
    assert not isinstance(sys.stdout, _Tee) and not isinstance(sys.stderr, _Tee)
    print("after close")

    printed = capsys.readouterr()
    assert printed.out == "epoch 1: loss 0.5\ntwo\nlines\nunended last line" + "after close\n"
    assert printed.err.startswith("a warning\n")
    logs = _messages(client, trial_id)
    expected = ["epoch 1: loss 0.5", "a warning", "two", "lines", "unended last line"]
    assert [line for line in logs if line in expected] == expected
    assert "after close" not in logs
    assert all(row.run_id == 1 for row in TrialLog.objects.filter(trial_id=trial_id))


def test_ship_logs_false_sends_nothing(client, capsys) -> None:
    core_v2.init(config=core_v2.Config(name="quiet", ship_logs=False), client=client)
    assert core_v2.info is not None
    trial_id = core_v2.info.trial.trial_id
    assert not isinstance(sys.stdout, _Tee)
    print("stays local")
    core_v2.close()
    assert "stays local" in capsys.readouterr().out
    assert not TrialLog.objects.filter(trial_id=trial_id).exists()


def test_a_resent_batch_is_stored_once_and_an_ended_run_takes_none(client, live_server) -> None:
    core_v2.init(config=core_v2.Config(name="resend", ship_logs=False), client=client)
    assert core_v2.info is not None
    trial_id, run_id = core_v2.info.trial.trial_id, core_v2.info.trial.run_id
    run_api = RegistryAPI.from_session(Session(live_server.url, core_v2.info.token))
    lines = [(f"line {n}", None, n) for n in (1, 2, 3)]
    assert run_api.unmanaged_logs(trial_id, run_id, lines).accepted == 3
    assert run_api.unmanaged_logs(trial_id, run_id, lines).accepted == 0  # the answer was lost
    assert client.unmanaged_logs(trial_id, run_id, [("line 4", None, 4)]).accepted == 1  # owner
    with pytest.raises(APIError) as bad:
        client._post(
            "unmanaged_logs",
            {"lines": [{"message": "x", "position": 0}]},
            trial_id=trial_id,
            run_id=run_id,
        )
    assert bad.value.status == 400 and "position" in str(bad.value.body)
    core_v2.close()
    assert _messages(client, trial_id) == ["line 1", "line 2", "line 3", "line 4"]
    with pytest.raises(APIError) as ended:
        client.unmanaged_logs(trial_id, run_id, [("late", None, 5)])
    assert ended.value.status == 409
    run_api.session._http.close()


class _Flaky:
    """The run's API whose first ``failures`` log calls find the master unreachable."""

    def __init__(self, api: RegistryAPI, failures: int) -> None:
        self.api, self.failures, self.calls = api, failures, 0

    def unmanaged_logs(self, trial_id, run_id, lines):
        self.calls += 1
        if self.calls <= self.failures:
            raise MasterUnreachableError("connection refused")
        return self.api.unmanaged_logs(trial_id, run_id, lines)


def test_lines_printed_while_the_master_is_away_are_held_and_delivered(
    client, live_server, capsys
) -> None:
    core_v2.init(config=core_v2.Config(name="outage", ship_logs=False), client=client)
    assert core_v2.info is not None
    trial_id, run_id = core_v2.info.trial.trial_id, core_v2.info.trial.run_id
    run_api = RegistryAPI.from_session(Session(live_server.url, core_v2.info.token))
    flaky = _Flaky(run_api, failures=3)
    shipper = LogShipper(flaky, trial_id, run_id, flush_interval=0.05)  # type: ignore[arg-type]
    shipper.start()
    for n in range(1, 1201):  # more than a batch
        print(f"step {n}")
    shipper.close()
    assert flaky.calls > 3
    assert _messages(client, trial_id) == [f"step {n}" for n in range(1, 1201)]
    run_api.session._http.close()


def test_an_unreachable_master_never_raises_into_the_script(capsys, caplog) -> None:
    api = RegistryAPI.from_session(Session("http://127.0.0.1:9", "token", max_retries=0))
    shipper = LogShipper(api, 1, 1, flush_interval=0.05, close_timeout=1.0)
    shipper.start()
    print("printed anyway")
    with caplog.at_level(logging.ERROR, logger="headway.core_v2"):
        shipper.close()
    assert "printed anyway" in capsys.readouterr().out
    assert "1 output lines not delivered" in caplog.text
    assert not isinstance(sys.stdout, _Tee)


def test_a_managed_trial_ships_nothing_itself(api, client, monkeypatch, tmp_path) -> None:
    from tests.helpers import start_run
    from tests.helpers_checkpoints import trial_on_storage
    from tests.helpers_trial_process import write_cluster_info

    trial = trial_on_storage(api, {"type": "shared_fs", "host_path": str(tmp_path)})
    run = start_run(trial)
    path = write_cluster_info(client.session.master_url, trial, run, tmp_path / "info.json")
    monkeypatch.setenv("HEADWAY_CLUSTER_INFO", str(path))
    core_v2.init(config=core_v2.Config(name="ignored"))
    assert not isinstance(sys.stdout, _Tee)  # the agent reads the process's output
    print("managed output")
    core_v2.close()
    assert not TrialLog.objects.filter(trial=trial).exists()
