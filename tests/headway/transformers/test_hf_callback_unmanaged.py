"""``HeadwayCallback`` opening its own unmanaged run through ``core_v2`` against a live
registry: a Trainer run reports and checkpoints, ends COMPLETED, and a rerun with the same
external ids downloads its latest checkpoint and resumes the Trainer from it."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from headway.client import RegistryAPI
from headway.experimental import core_v2
from headway.transformers import HeadwayCallback
from registry.models import Checkpoint, MetricReport, State, Trial
from tests.headway.transformers import tiny_trainer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(
    api, live_server, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RegistryAPI]:
    """alice's client of the live registry; no managed trial around this process."""
    monkeypatch.delenv("HEADWAY_CLUSTER_INFO", raising=False)
    monkeypatch.setenv("HEADWAY_SYSTEM_METRICS", "0")
    monkeypatch.chdir(tmp_path)
    user_api = RegistryAPI(live_server.url, api.token)
    yield user_api
    core_v2.close()  # a run the test left open ends while the database is there
    user_api.session._http.close()


CONFIG = core_v2.Config(
    name="hf-unmanaged",
    searcher={"metric": "eval_loss", "smaller_is_better": True},
    external_experiment_id="hf-exp",
    external_trial_id="hf-trial",
)


def test_an_unmanaged_trainer_run_and_its_resume(client, tmp_path: pathlib.Path) -> None:
    args = tiny_trainer.training_args(tmp_path / "out-1", max_steps=6, save_steps=6)
    callback = HeadwayCallback(args, CONFIG, client=client)
    assert args.resume_from_checkpoint is None
    assert core_v2.info is not None
    trial_id = core_v2.info.trial.trial_id
    tiny_trainer.trainer(args, [callback]).train()
    callback.close()
    trial = Trial.objects.get(id=trial_id)
    assert trial.state == State.COMPLETED and trial.experiment.unmanaged
    assert [c.steps_completed for c in Checkpoint.objects.filter(trial=trial)] == [6]

    # The same external ids: the same trial, resumed from its step-6 checkpoint to step 12.
    args = tiny_trainer.training_args(tmp_path / "out-2")
    callback = HeadwayCallback(args, CONFIG, client=client)
    assert core_v2.info is not None and core_v2.info.trial.trial_id == trial_id
    assert args.resume_from_checkpoint == str(tmp_path / "out-2" / "checkpoint-6")
    hf = tiny_trainer.trainer(args, [callback])
    hf.train(resume_from_checkpoint=args.resume_from_checkpoint)
    callback.close()
    assert hf.state.global_step == 12

    def steps(group: str) -> list[int]:
        rows = MetricReport.objects.filter(trial_id=trial_id, group=group)
        return sorted(rows.values_list("steps_completed", flat=True))

    assert steps("training") == [4, 6, 8, 12]
    assert steps("validation") == [6, 12]
    assert sorted(c.steps_completed for c in Checkpoint.objects.filter(trial_id=trial_id)) == [
        6,
        12,
    ]
    assert Trial.objects.get(id=trial_id).state == State.COMPLETED
