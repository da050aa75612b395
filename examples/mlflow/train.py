"""A PyTorch script written for MLflow, logging to Headway unchanged.

Run it with the master's URL and a Headway user token::

    MLFLOW_TRACKING_URI=http://127.0.0.1:8000 MLFLOW_TRACKING_TOKEN=<token> python train.py

It fits a small regression model, logs its hyperparameters (Headway hparams), a training loss
per step and a validation loss per epoch (keys starting ``val_`` are validation metrics), and
the trained weights as an artifact; the run ends FINISHED (the trial COMPLETED).
"""

from __future__ import annotations

import os
import tempfile

import mlflow
import torch

EXPERIMENT = os.environ.get("MLFLOW_EXPERIMENT_NAME", "mlflow-example")
HPARAMS = {"lr": 0.05, "epochs": 3, "batch_size": 16, "hidden": 8}


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(256, 1)
    train_x, train_y, val_x, val_y = x[:192], y[:192], x[192:], y[192:]
    model = torch.nn.Sequential(
        torch.nn.Linear(4, HPARAMS["hidden"]),
        torch.nn.ReLU(),
        torch.nn.Linear(HPARAMS["hidden"], 1),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=HPARAMS["lr"])
    loss_fn = torch.nn.MSELoss()

    mlflow.set_experiment(EXPERIMENT)
    with mlflow.start_run(run_name="regression") as run:
        mlflow.log_params(HPARAMS)
        mlflow.set_tag("example", "mlflow")
        step = 0
        for epoch in range(HPARAMS["epochs"]):
            model.train()
            for start in range(0, len(train_x), HPARAMS["batch_size"]):
                batch = slice(start, start + HPARAMS["batch_size"])
                optimizer.zero_grad()
                loss = loss_fn(model(train_x[batch]), train_y[batch])
                loss.backward()
                optimizer.step()
                step += 1
                mlflow.log_metric("loss", loss.item(), step=step)
            model.eval()
            with torch.no_grad():
                val_loss = loss_fn(model(val_x), val_y).item()
            mlflow.log_metrics({"val_loss": val_loss, "epoch": epoch}, step=step)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "model.pt")
            torch.save(model.state_dict(), path)
            mlflow.log_artifact(path, artifact_path="weights")
        print(
            f"run {run.info.run_id} of experiment {run.info.experiment_id}: val_loss={val_loss:.4f}"
        )


if __name__ == "__main__":
    main()
