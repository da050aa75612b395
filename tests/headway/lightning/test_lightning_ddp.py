"""Two-process DDP (gloo, CPU) Lightning training into one managed trial: only rank zero
reports metrics and registers checkpoints."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

pytest.importorskip("lightning")

from registry.models import Checkpoint, MetricReport
from tests.helpers import REPO, run_ranks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WORKER = textwrap.dedent(
    """
    import json, os, sys
    os.environ["HEADWAY_CLUSTER_INFO"] = sys.argv[1]
    sys.path.insert(0, sys.argv[3])
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from headway import core
    from headway.lightning import HeadwayCallback, HeadwayLogger
    from tests.headway.lightning._tiny import TinyRegression, loaders, trainer_kwargs

    class RankModule(TinyRegression):
        def training_step(self, batch, batch_idx):
            # sync_dist=False: each rank logs its own rank; only rank 0's may be stored.
            self.log("train_rank", float(self.global_rank))
            return super().training_step(batch, batch_idx)

    root = sys.argv[2]
    train, val = loaders(batches=4)
    with core.init() as ctx:
        headway_logger = HeadwayLogger(ctx)
        kwargs = {**trainer_kwargs(root), "devices": 2}
        trainer = pl.Trainer(
            max_epochs=2, strategy="ddp", logger=headway_logger,
            callbacks=[HeadwayCallback(ctx), ModelCheckpoint(dirpath=root + "/ckpt")],
            **kwargs,
        )
        trainer.fit(RankModule(), train, val)
        out = {"rank": trainer.global_rank, "registered": headway_logger.registered_checkpoints,
               "global_step": trainer.global_step}
    print("RESULT" + json.dumps(out), flush=True)
    os._exit(0)  # skip gloo teardown races at exit (not what this test checks)
    """
)


def test_only_rank_zero_reports_under_ddp(managed_trial, tmp_path: pathlib.Path) -> None:
    trial, info_path = managed_trial()
    r0, r1 = run_ranks(WORKER, str(info_path), str(tmp_path), str(REPO), timeout=300)
    # 16 samples, batch 4, two ranks: 2 batches a rank an epoch, 2 epochs.
    assert r0["global_step"] == r1["global_step"] == 4
    assert r1["registered"] == {} and len(r0["registered"]) == 2  # one file an epoch

    reports = list(MetricReport.objects.filter(trial=trial, group="training"))
    steps = sorted(r.steps_completed for r in reports)
    assert steps == [1, 2, 3, 4]  # one report a step: nothing from rank 1 on top
    assert {r.metrics["train_rank"] for r in reports} == {0.0}
    assert sorted(
        MetricReport.objects.filter(trial=trial, group="validation").values_list(
            "steps_completed", flat=True
        )
    ) == [2, 4]
    stored = sorted(
        Checkpoint.objects.filter(trial=trial).values_list("steps_completed", flat=True)
    )
    assert stored == [2, 4]  # one registration a save (ModelCheckpoint saves every epoch)
