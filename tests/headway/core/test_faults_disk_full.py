"""Security review finding: "A full checkpoint disk gives an obscure torch error and the trial ends
ERROR".

``torch.save`` onto a full filesystem raises ``RuntimeError('[enforce fail at
inline_container.cc:672] . unexpected pos ...')``. ``store_path`` now raises
``CheckpointStorageFull`` naming the checkpoint folder and the free space, removes the partial
checkpoint and registers nothing. The disk is a real 1 MiB tmpfs mounted in a private mount
namespace (``unshare -rm``), so the fault is the kernel's, not a simulation.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import REPO, require

SCRIPT = textwrap.dedent(
    """
    import json, os, subprocess, sys
    import torch
    from headway import core

    base = sys.argv[1]
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", base], check=True)
    with core.init(checkpoint_storage=base) as ctx:
        try:
            with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id):
                {write}
        except core.CheckpointStorageFull as exc:
            print(json.dumps({"error": str(exc), "left": os.listdir(base),
                              "free": exc.free_bytes}))
    """
)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or sys.platform != "linux":
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.parametrize(
    "write",
    [
        # PyTorch's own error on a full disk is the obscure RuntimeError.
        'torch.save({"w": torch.zeros(1_000_000)}, path / "model.pth")',
        # Plain writes fail with OSError(ENOSPC).
        'open(path / "big.bin", "wb").write(os.urandom(2_000_000))',
    ],
    ids=["torch-save", "plain-write"],
)
def test_finding_full_checkpoint_disk_gives_a_clear_error(tmp_path, write):
    require(_unshare_works(), "needs unprivileged mount namespaces (unshare -rm) on Linux")
    base = tmp_path / "tiny"
    base.mkdir()
    script = tmp_path / "save.py"
    script.write_text(SCRIPT.replace("{write}", write))
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, str(script), str(base)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "checkpoint storage is full: writing " in result["error"]
    assert str(base) in result["error"] and " free on its filesystem" in result["error"]
    assert result["free"] is not None and result["free"] < 1024 * 1024
    assert result["left"] == []  # the partial checkpoint was removed, nothing registered


def test_finding_full_checkpoint_disk_other_errors_are_not_disguised(tmp_path):
    """A failure on a disk with space left is re-raised as it was."""
    from headway import core

    with (
        core.init(checkpoint_storage=str(tmp_path)) as ctx,
        pytest.raises(ValueError, match="boom"),
        ctx.checkpoint.store_path({"steps_completed": 1}),
    ):
        raise ValueError("boom")
