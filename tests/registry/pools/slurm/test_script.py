"""The batch script of a run's Slurm job (registry.pools.slurm._script): options from the pool's
settings and the run, Headway's variables only, one node process per node."""

from __future__ import annotations

import shlex

from registry.pools.slurm._script import JobLayout, job_name, job_script
from registry.pools.slurm.settings import SlurmPoolSettings


def _script(settings: SlurmPoolSettings, layout: JobLayout | None = None, env=None) -> str:
    return job_script(
        settings,
        layout or JobLayout(1, 2),
        name=job_name("ns", 7, 3),
        python="/opt/hw/bin/python",
        work_dir="/scratch/hw",
        environment=env or {"HEADWAY_MASTER": "http://m:8000", "HEADWAY_SLURM_HOST_KEYS": "k0,k1"},
    )


def _options(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")
    ]


def test_the_layout_becomes_nodes_tasks_and_gres_per_node():
    settings = SlurmPoolSettings(gres_per_slot="gpu:a100:1", slots_per_node=4)
    options = _options(_script(settings, JobLayout(2, 4)))
    assert "--nodes=2" in options and "--ntasks-per-node=4" in options
    assert "--gres=gpu:a100:4" in options
    assert "--job-name=headway-ns-t7-r3" in options


def test_the_pools_settings_and_headways_own_options():
    settings = SlurmPoolSettings(
        partition="debug", account="ml", qos="low", time_limit="30", preempt_grace_seconds=90,
        sbatch_options=["--exclusive", "--constraint=a100"],
    )  # fmt: skip
    options = _options(_script(settings))
    for expected in (
        "--partition=debug", "--account=ml", "--qos=low", "--time=30", "--signal=USR1@90",
        "--no-requeue", "--export=NONE", "--output=/scratch/hw/slurm-%j.out", "--exclusive",
        "--constraint=a100",
    ):  # fmt: skip
        assert expected in options
    assert not any(option.startswith("--gres") for option in options)  # CPU slots


def test_the_job_gets_headways_variables_and_one_node_process_per_node():
    script = _script(SlurmPoolSettings(), JobLayout(3, 2), {"HEADWAY_MASTER": "http://m:8000/a b"})
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "export HEADWAY_MASTER='http://m:8000/a b'" in lines  # quoted for the shell
    assert "export SLURM_EXPORT_ENV=ALL" in lines
    srun = shlex.split(lines[-1].removeprefix("exec "))
    assert srun[0] == "srun"
    assert {"--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--cpus-per-task=2"} <= set(srun)
    assert srun[-3:] == ["/opt/hw/bin/python", "-m", "workers.slurm_node"]
