"""Run a trial class: ``python -m headway.exec.harness package.module:TrialClass``.

The class subclasses ``headway.pytorch.PyTorchTrial`` or
``headway.pytorch.deepspeed.DeepSpeedTrial``; each runs under its own ``init()`` / ``Trainer``.

The worker uses this when an experiment's ``entrypoint`` has the ``module:Class`` form (as
Determined does for Trial classes). The class is imported from the current directory (the
unpacked model definition). On the cluster everything comes from ``headway.get_cluster_info()``;
locally, ``--config exp.yaml`` supplies constant hyperparameters and lengths, e.g.::

    cd examples/digits && python -m headway.exec.harness model_def:DigitsTrial --config const.yaml

Exit status: 0 when training completed or was preempted (after a checkpoint), 1 with a one-line
message for a bad entrypoint or config, and a traceback for errors raised by the trial itself.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from typing import Any

import yaml

from headway.expconf import ConfigError, constant_hparams, parse_local_config

logger = logging.getLogger("headway.exec")


class EntrypointError(Exception):
    """A user mistake in the entrypoint or config, reported as one line."""


def load_trial_class(entrypoint: str) -> type:
    """Import ``module:Class`` from the current directory and check it is a trial class.

    Raises ``EntrypointError`` with a one-line message when the form is wrong, the module or
    class is missing, or the class subclasses neither ``headway.pytorch.PyTorchTrial`` nor
    ``headway.pytorch.deepspeed.DeepSpeedTrial``. Errors raised while the module itself runs
    propagate unchanged (they are bugs in the model code).
    """
    from headway.pytorch import PyTorchTrial

    module_name, sep, class_name = entrypoint.partition(":")
    if not sep or not module_name or not class_name:
        raise EntrypointError(
            f"entrypoint {entrypoint!r} must have the form package.module:TrialClass"
        )
    cwd = os.getcwd()
    if not sys.path or sys.path[0] != cwd:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise EntrypointError(
                f"entrypoint {entrypoint!r}: no module named {module_name!r} in {cwd}"
            ) from None
        raise
    trial_class = getattr(module, class_name, None)
    if trial_class is None:
        raise EntrypointError(
            f"entrypoint {entrypoint!r}: module {module_name!r} has no attribute {class_name!r}"
        )
    if not isinstance(trial_class, type) or not (
        issubclass(trial_class, PyTorchTrial) or _is_deepspeed_trial(trial_class)
    ):
        raise EntrypointError(
            f"entrypoint {entrypoint!r}: {class_name} is not a subclass of "
            "headway.pytorch.PyTorchTrial or headway.pytorch.deepspeed.DeepSpeedTrial"
        )
    return trial_class


def _is_deepspeed_trial(trial_class: type) -> bool:
    # A DeepSpeedTrial subclass was imported with headway.pytorch.deepspeed, so it is in
    # sys.modules; looking there keeps PyTorchTrial runs from importing DeepSpeed.
    module = sys.modules.get("headway.pytorch.deepspeed")
    return module is not None and issubclass(trial_class, module.DeepSpeedTrial)


def _local_config(path: str | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    if path is None:
        return None, None
    try:
        with open(path, encoding="utf-8") as fh:
            conf = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise EntrypointError(f"--config {path}: {exc}") from None
    if not isinstance(conf, dict):
        raise EntrypointError(f"--config {path}: expected a mapping at the top level")
    try:
        hparams = constant_hparams(parse_local_config(conf))
    except ConfigError as exc:
        fields = "; ".join(f"{field} {' '.join(msgs)}" for field, msgs in exc.errors.items())
        raise EntrypointError(f"--config {path}: {fields}") from None
    return hparams, conf


def run(entrypoint: str, config_path: str | None = None) -> None:
    """Build the context, instantiate the trial class and ``fit()`` it."""
    import headway
    from headway import pytorch

    trial_class = load_trial_class(entrypoint)
    api: Any = pytorch
    if _is_deepspeed_trial(trial_class):
        from headway.pytorch import deepspeed

        api = deepspeed
    hparams, conf = (None, None)
    if headway.get_cluster_info() is None:
        hparams, conf = _local_config(config_path)
    elif config_path is not None:
        logger.warning("--config is ignored on the cluster")
    from headway.pytorch._trainer_utils import launcher_process_group

    # Under the launcher: one torch.distributed group (NCCL + cuda:LOCAL_RANK on a GPU host,
    # gloo otherwise), created before DeepSpeed's init() so that it adopts it.
    with (
        launcher_process_group() as distributed,
        api.init(hparams=hparams, exp_conf=conf, distributed=distributed) as context,
    ):
        trial = trial_class(context)
        # As Determined's harness: these two config fields are fit() arguments.
        config = context._trainer_config
        api.Trainer(trial, context).fit(
            step_zero_validation=config.perform_initial_validation,
            profiling_enabled=config.profiling_enabled,
        )
    # Free the trial (its DDP model holds the destroyed gloo group) now, not in the interpreter's
    # teardown, where torch's gloo teardown aborts a rank now and then ("terminate called without
    # an active exception", exit 134), failing a finished run: with a Trainer script about 1
    # launch in 25, none in 150 with the trial freed this way (docs/distributed.md, "Limits").
    del trial
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m headway.exec.harness",
        description="Run a Headway PyTorchTrial or DeepSpeedTrial.",
    )
    parser.add_argument("entrypoint", help="package.module:TrialClass")
    parser.add_argument("--config", help="experiment YAML for local runs (constant hparams)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(args.entrypoint, args.config)
    except EntrypointError as exc:
        print(f"headway.exec.harness: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
