"""Determined 0.38's own examples, ported by changing their imports only, run on a real cluster.

``tests/fixtures/determined_ports/`` holds our rewrites of Determined's
``examples/tutorials/mnist_pytorch``, ``examples/tutorials/core_api`` (stages 0-4) and
``examples/deepspeed/dcgan``: the same files, Determined API calls, config sections and keys,
with ``determined`` imports changed to ``headway`` and the dataset downloads replaced by local
data of the same shape (scikit-learn's digits upscaled to MNIST's 28x28). Sizes are scaled down
(slots, trials, widths, batch sizes, lengths) so the suite stays short; no call or key is
removed. Each test submits one example's YAML as it is (the dcgan's with the edits listed at
its tests, which Headway cannot spare a porting user) and asserts the run completes and did
what Determined does, so losing any API name, config key or behaviour they rely on fails here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from headway.cli import pack_model_definition
from tests.helpers import REPO, b64, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PORTS = REPO / "tests" / "fixtures" / "determined_ports"
MNIST = PORTS / "mnist_pytorch"
CORE_API = PORTS / "core_api"
DCGAN = PORTS / "dcgan"

# mnist_pytorch: 1,280 training images at 64 per global batch; `--epochs 1`.
MNIST_BATCHES = 20
# dcgan: trainer.py's `fit(max_length=pytorch.Batch(20))`.
DCGAN_BATCHES = 20


def submit(cluster_api, directory: Path, config_name: str) -> dict:
    """Submit ``directory/config_name`` as it is with ``directory`` as the model definition;
    return the experiment."""
    config = yaml.safe_load((directory / config_name).read_text())
    model = pack_model_definition(directory, 32 * 1024 * 1024)
    return cluster_api.post("experiments/", {"config": config, "model_definition": b64(model)})


def wait_experiment(cluster_api, experiment_id: int, timeout: float = 600) -> dict:
    """Wait until the experiment ends; return it, failing with its trials' last logs unless
    it COMPLETED."""

    def ended():
        experiment = cluster_api.get(f"experiments/{experiment_id}/")
        return experiment if experiment["state"] in ("COMPLETED", "ERROR", "CANCELED") else None

    experiment = wait_for(ended, timeout, f"experiment {experiment_id} to end")
    if experiment["state"] != "COMPLETED":
        logs = {
            t["id"]: cluster_api.logs(t["id"])[-40:] for t in trials_of(cluster_api, experiment)
        }
        pytest.fail(f"experiment {experiment_id} ended {experiment['state']}: {logs}")
    return experiment


def trials_of(cluster_api, experiment: dict) -> list[dict]:
    return cluster_api.get(f"experiments/{experiment['id']}/trials/", limit=100)["results"]


def only_trial(cluster_api, experiment: dict) -> dict:
    (trial,) = trials_of(cluster_api, experiment)
    assert trial["state"] == "COMPLETED", trial
    return trial


def checkpoints_of(cluster_api, trial_id: int) -> list[dict]:
    return cluster_api.get(f"trials/{trial_id}/checkpoints/")["results"]


# -- examples/tutorials/mnist_pytorch -------------------------------------------------------------


def test_mnist_pytorch_const_trains_one_epoch_and_validates(cluster_api) -> None:
    experiment = wait_experiment(cluster_api, submit(cluster_api, MNIST, "const.yaml")["id"])
    trial = only_trial(cluster_api, experiment)
    assert trial["steps_completed"] == MNIST_BATCHES
    steps, losses = cluster_api.series(trial["id"], "validation", "validation_loss")
    assert steps == [MNIST_BATCHES] and losses[0] > 0
    steps, accuracy = cluster_api.series(trial["id"], "validation", "accuracy")
    assert steps == [MNIST_BATCHES] and 0 <= accuracy[0] <= 1
    (checkpoint,) = checkpoints_of(cluster_api, trial["id"])
    assert checkpoint["steps_completed"] == MNIST_BATCHES


def test_mnist_pytorch_distributed_trains_as_one_two_rank_group(cluster_api) -> None:
    # distributed.yaml: `python3 -m headway.launch.torch_distributed python3 train.py` on 2
    # slots, and the script's plain `pytorch.init()`. Joined, the ranks are one group of size 2:
    # each reads its half of the data at 64 // 2 = 32 records a batch, so an epoch is the same
    # 20 global batches as on one slot (a rank that read all the data would count 40), and only
    # the chief reports and registers the checkpoint (two lone ranks would register two).
    experiment = wait_experiment(cluster_api, submit(cluster_api, MNIST, "distributed.yaml")["id"])
    trial = only_trial(cluster_api, experiment)
    assert trial["steps_completed"] == MNIST_BATCHES
    checkpoints = checkpoints_of(cluster_api, trial["id"])
    assert [c["steps_completed"] for c in checkpoints] == [MNIST_BATCHES], checkpoints
    steps, _ = cluster_api.series(trial["id"], "validation", "validation_loss")
    assert steps == [MNIST_BATCHES]
    logs = cluster_api.logs(trial["id"])
    assert any(line.startswith("[rank=1] || ") for line in logs), logs[-40:]


def test_mnist_pytorch_adaptive_asha_by_time_metric_completes(cluster_api) -> None:
    # The 0.38 form: `time_metric: batches`, `max_time`, and a script that never reads its
    # searcher operations (`--epochs 1`): ASHA stops losing trials by preemption.
    experiment = wait_experiment(
        cluster_api, submit(cluster_api, MNIST, "adaptive.yaml")["id"], 900
    )
    trials = trials_of(cluster_api, experiment)
    assert len(trials) == 2
    assert all(t["state"] == "COMPLETED" for t in trials), trials
    assert max(t["steps_completed"] for t in trials) == MNIST_BATCHES


def test_mnist_pytorch_dist_random_runs_two_trials_under_the_launcher(cluster_api) -> None:
    experiment = wait_experiment(cluster_api, submit(cluster_api, MNIST, "dist_random.yaml")["id"])
    trials = trials_of(cluster_api, experiment)
    assert len(trials) == 2 and len({str(t["hparams"]) for t in trials}) == 2
    for trial in trials:
        assert trial["state"] == "COMPLETED" and trial["steps_completed"] == MNIST_BATCHES
        steps, _ = cluster_api.series(trial["id"], "validation", "accuracy")
        assert steps == [MNIST_BATCHES]


# -- examples/tutorials/core_api ------------------------------------------------------------------


def test_core_api_stage_0_runs_an_unmodified_script(cluster_api) -> None:
    experiment = wait_experiment(cluster_api, submit(cluster_api, CORE_API, "0_start.yaml")["id"])
    trial = only_trial(cluster_api, experiment)
    assert any("x is now 100" in line for line in cluster_api.logs(trial["id"]))


def test_core_api_stage_1_reports_metrics_and_progress(cluster_api) -> None:
    experiment = wait_experiment(cluster_api, submit(cluster_api, CORE_API, "1_metrics.yaml")["id"])
    trial = only_trial(cluster_api, experiment)
    steps, values = cluster_api.series(trial["id"], "training", "x")
    assert steps == list(range(10, 101, 10)) and values == steps
    assert cluster_api.series(trial["id"], "validation", "x") == ([100], [100])
    assert trial["progress"] == pytest.approx(1.0)
    logs = cluster_api.logs(trial["id"])
    for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
        assert any(line.startswith(f"{level}: ") for line in logs), level


def test_core_api_stage_2_checkpoints_every_ten_steps(cluster_api) -> None:
    experiment = wait_experiment(
        cluster_api, submit(cluster_api, CORE_API, "2_checkpoints.yaml")["id"]
    )
    trial = only_trial(cluster_api, experiment)
    checkpoints = checkpoints_of(cluster_api, trial["id"])
    assert sorted(c["steps_completed"] for c in checkpoints) == list(range(10, 101, 10))
    assert all(c["metadata"]["steps_completed"] == c["steps_completed"] for c in checkpoints)
    assert cluster_api.series(trial["id"], "validation", "x") == ([100], [100])
    assert trial["progress"] == pytest.approx(1.0)


def test_core_api_stage_2_resumes_after_a_pause_at_its_checkpoint(cluster_api) -> None:
    experiment = submit(cluster_api, CORE_API, "2_checkpoints.yaml")
    (trial,) = trials_of(cluster_api, experiment)
    cluster_api.wait_trial(trial["id"], lambda t: t["latest_checkpoint"], "a checkpoint")
    cluster_api.post(f"trials/{trial['id']}/pause")
    paused = cluster_api.wait_trial(
        trial["id"], lambda t: t["state"] == "PAUSED" and t["run_state"] == "EXITED", "PAUSED"
    )
    assert 10 <= paused["steps_completed"] < 100
    cluster_api.post(f"trials/{trial['id']}/activate")
    wait_experiment(cluster_api, experiment["id"])
    # x counts one per step across both runs: the second run restored x and the step.
    steps, values = cluster_api.series(trial["id"], "training", "x")
    assert steps == list(range(10, 101, 10)) and values == steps


def test_core_api_stage_3_asha_by_time_metric_completes(cluster_api) -> None:
    experiment = wait_experiment(
        cluster_api, submit(cluster_api, CORE_API, "3_hpsearch.yaml")["id"], 900
    )
    trials = trials_of(cluster_api, experiment)
    assert len(trials) == 4 and all(t["state"] == "COMPLETED" for t in trials), trials
    # At least the best trial ran to max_time; its validations carry the time metric.
    assert max(t["steps_completed"] for t in trials) == 100
    for trial in trials:
        steps, batches = cluster_api.series(trial["id"], "validation", "batches")
        assert batches == steps


def test_core_api_stage_4_runs_its_own_launcher_on_two_slots(cluster_api) -> None:
    # The script starts its workers itself (`headway.launch.wrap_rank`), builds each rank's
    # DistributedContext from ClusterInfo, and sums both ranks' increment_by with allgather.
    experiment = wait_experiment(
        cluster_api, submit(cluster_api, CORE_API, "4_distributed.yaml")["id"]
    )
    trial = only_trial(cluster_api, experiment)
    increment_by = trial["hparams"]["increment_by"]
    steps, values = cluster_api.series(trial["id"], "training", "x")
    assert steps == list(range(10, 101, 10))
    assert values == [2 * increment_by * s for s in steps]  # both ranks' increments
    checkpoints = checkpoints_of(cluster_api, trial["id"])
    assert sorted(c["steps_completed"] for c in checkpoints) == steps  # the chief's only
    logs = cluster_api.logs(trial["id"])
    assert any(line.startswith("[rank=1] ") and "worker starting" in line for line in logs), logs[
        -40:
    ]


# -- examples/deepspeed/dcgan ---------------------------------------------------------------------

# What Determined's dcgan needs beyond imports and data to run here, each applied by
# `dcgan_as_ported` below and listed in docs/pytorch-trial.md ("Porting from Determined"):
# - `environment.image` and `bind_mounts` are refused (a trial is a process on the worker host,
#   not a container), so `data.dataroot` names a host directory instead of the mount's `/data`;
# - DeepSpeed 0.19 (the version Headway pins) refuses the generator's backward pass through the
#   discriminator engine at ZeRO stage 0 ("Direct calls to tensor.backward() are not
#   supported"), which the DeepSpeed of Determined's 0.38 image allowed: `zero_optimization`
#   stage 1 lifts that.
# And one for speed only: `torch_adam` (DeepSpeed's fused Adam compiles for minutes on a CPU).


def dcgan_as_ported(target: Path) -> Path:
    """A copy of the dcgan port in ``target`` with the edits above; returns its directory."""
    shutil.copytree(DCGAN, target)
    config = yaml.safe_load((target / "mnist.yaml").read_text())
    del config["environment"]["image"]
    del config["bind_mounts"]
    data_root = target / "dataroot"
    data_root.mkdir()
    config["data"]["dataroot"] = str(data_root)
    (target / "mnist.yaml").write_text(yaml.safe_dump(config))
    ds_config = json.loads((target / "ds_config.json").read_text())
    ds_config["zero_optimization"] = {"stage": 1}
    ds_config["optimizer"]["params"]["torch_adam"] = True
    (target / "ds_config.json").write_text(json.dumps(ds_config))
    return target


def test_dcgan_config_container_fields_are_refused_by_name() -> None:
    from headway.expconf import ConfigError, parse_experiment_config

    config = yaml.safe_load((DCGAN / "mnist.yaml").read_text())
    with pytest.raises(ConfigError, match=r"bind_mounts: not supported: .* not in a container"):
        parse_experiment_config(config)
    del config["bind_mounts"]
    with pytest.raises(
        ConfigError, match=r"environment\.image: not supported: .* not in a container"
    ):
        parse_experiment_config(config)
    del config["environment"]["image"]
    parsed = parse_experiment_config(config)
    assert parsed.data == {"dataroot": "/data", "dataset": "mnist", "image_size": 64}


def test_dcgan_deepspeed_trains_two_engines_on_two_slots(cluster_api, tmp_path) -> None:
    pytest.importorskip("torchvision")  # Determined's model.py logs images with make_grid
    pytest.importorskip("deepspeed")
    directory = dcgan_as_ported(tmp_path / "dcgan")
    experiment = wait_experiment(cluster_api, submit(cluster_api, directory, "mnist.yaml")["id"])
    trial = only_trial(cluster_api, experiment)
    assert trial["steps_completed"] == DCGAN_BATCHES
    for name in ("errD", "errG", "D_x", "D_G_z1", "D_G_z2"):
        steps, _ = cluster_api.series(trial["id"], "training", name)
        assert steps and steps[-1] == DCGAN_BATCHES, name
    # min_validation_period {batches: 0}: no validation until the end of training.
    assert cluster_api.series(trial["id"], "validation", "no_validation_metric")[0] == [
        DCGAN_BATCHES
    ]
    checkpoints = checkpoints_of(cluster_api, trial["id"])
    assert [c["steps_completed"] for c in checkpoints] == [DCGAN_BATCHES]  # the chief's only
    resources = set(cluster_api.get(f"checkpoints/{checkpoints[0]['uuid']}/")["resources"])
    # Both engines, each rank's ZeRO shard of each, and the images written to TensorBoard.
    for engine in ("model0", "model1"):
        assert {
            f"{engine}/mp_rank_00_model_states.pt",
            *(f"{engine}/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" for rank in (0, 1)),
        } <= resources
    assert any(r.startswith("tensorboard/") for r in resources), sorted(resources)
