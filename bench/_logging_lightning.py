"""The Lightning rows of bench/logging_overhead.py: one small fit, with one logger or none.

A 64-32-10 MLP on scikit-learn's digits (1,797 images of 8x8), batches of 32, SGD, on CPU with
one torch thread, logging ``train_loss``, ``train_acc`` and ``lr`` every step
(``log_every_n_steps=1``). ``fit_once`` times the whole ``Trainer`` life (construction, ``fit``,
the logger's ``finalize``: a logger that delivers in the background pays for delivery there), so
each logger's run creation and its last metrics delivered count.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from typing import Any

import lightning.pytorch as pl
import requests
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# The rows: no logger, Headway's, MLflow's (each log_metrics call one log_batch request before
# the step goes on), MLflow's with ``synchronous=False`` (MLflow's own background queue).
KINDS = ("none", "headway", "mlflow", "mlflow_async")
BATCH = 32


class DigitsMLP(pl.LightningModule):
    """64 -> 32 -> 10 MLP; logs three metrics a step."""

    def __init__(self, lr: float = 0.05, hidden: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self.net(x)
        loss: torch.Tensor = nn.functional.cross_entropy(logits, y)
        self.log("train_loss", loss)
        self.log("train_acc", (logits.argmax(1) == y).float().mean())
        self.log("lr", float(self.hparams["lr"]))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=float(self.hparams["lr"]))


def digits() -> TensorDataset:
    """scikit-learn's digits, scaled to [0, 1]: (1797, 64) float32 and (1797,) int64."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return TensorDataset(torch.tensor(x / 16.0, dtype=torch.float32), torch.tensor(y))


class _Run(pl.Callback):
    """The logger's run as the fit ends (before ``finalize`` forgets it)."""

    version: str | None = None

    def on_train_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        logger = trainer.logger
        self.version = None if logger is None else str(logger.version)


def make_logger(kind: str, urls: dict[str, str], token: str, index: int) -> Any:
    """The ``Trainer``'s logger of row ``kind`` (False for ``none``).

    ``urls``: ``headway`` (the master) and ``mlflow`` (the tracking server); ``token``: the
    Headway user's; ``index``: makes each run's name unique.
    """
    if kind == "none":
        return False
    if kind == "headway":
        from headway.client import RegistryAPI
        from headway.experimental import core_v2
        from headway.lightning import HeadwayLogger

        config = core_v2.Config(name=f"logging-overhead-{index}")
        return HeadwayLogger(
            config=config, client=RegistryAPI(urls["headway"], token), log_model=False
        )
    if kind in ("mlflow", "mlflow_async"):
        from lightning.pytorch.loggers import MLFlowLogger

        return MLFlowLogger(
            experiment_name="logging-overhead",
            run_name=f"{kind}-{index}",
            tracking_uri=urls["mlflow"],
            synchronous=False if kind == "mlflow_async" else None,
        )
    raise ValueError(f"unknown logger kind {kind!r} (one of {', '.join(KINDS)})")


def fit_once(
    kind: str, steps: int, data: TensorDataset, urls: dict[str, str], token: str, index: int
) -> dict[str, Any]:
    """One fit of ``steps`` batches with logger ``kind``.

    Returns ``wall_s`` and ``cpu_s`` (this process) of the ``Trainer``'s whole life, and
    ``run`` (the Headway trial id or the MLflow run id; None without a logger).
    """
    torch.manual_seed(0)
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    run = _Run()
    with (
        tempfile.TemporaryDirectory(prefix="headway-bench-fit-") as root,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # "does not have many workers" and the like: advice
        t0, c0 = time.perf_counter(), time.process_time()
        trainer = pl.Trainer(
            max_steps=steps,
            logger=make_logger(kind, urls, token, index),
            log_every_n_steps=1,
            accelerator="cpu",
            devices=1,
            default_root_dir=root,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[run],
        )
        trainer.fit(DigitsMLP(), train_dataloaders=loader)
        wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    run_id = run.version
    if kind == "headway" and run_id is not None:
        run_id = run_id.removeprefix("trial-")
    return {"wall_s": wall_s, "cpu_s": cpu_s, "run": run_id}


def points_stored(kind: str, run: str | None, urls: dict[str, str], token: str) -> int | None:
    """How many ``train_loss`` points the run's store holds (None: no logger or no run)."""
    if kind == "none" or run is None:
        return None
    if kind == "headway":
        params: dict[str, str | int] = {"name": "train_loss", "max_points": 0}
        resp = requests.get(
            f"{urls['headway']}/api/v1/trials/{run}/metrics/",
            params=params,
            headers={"Authorization": f"Token {token}"},
            timeout=60,
        )
        resp.raise_for_status()
        series = resp.json()["series"]
        return int(series[0]["count"]) if series else 0
    from mlflow import MlflowClient

    return len(MlflowClient(tracking_uri=urls["mlflow"]).get_metric_history(run, "train_loss"))


def quiet() -> None:
    """Keep Lightning's and the loggers' per-fit info lines out of the benchmark's output."""
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "headway", "mlflow"):
        logging.getLogger(name).setLevel(logging.ERROR)
