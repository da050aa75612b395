"""DeepSpeed's silent op builds are announced in the trial's log: the first
``FusedAdam`` compiles for minutes without output."""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytest.importorskip("deepspeed")


def _probe_builder() -> Any:
    """An op DeepSpeed was not installed with, so ``load()`` goes to ``jit_load()``; it is
    incompatible, so DeepSpeed refuses it before compiling anything."""
    from deepspeed.ops.op_builder.builder import OpBuilder

    import headway.pytorch.deepspeed  # noqa: F401 - installs the announcement (and the accelerator)

    class ProbeBuilder(OpBuilder):
        NAME = "headway_probe_op"

        def __init__(self) -> None:
            super().__init__(name=self.NAME)

        def absolute_name(self) -> str:
            return f"deepspeed.ops.{self.NAME}"

        def sources(self) -> list[str]:
            return []

        def is_compatible(self, verbose: bool = False) -> bool:
            return False

    return ProbeBuilder()


def test_a_jit_build_is_logged_before_it_starts(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.INFO, logger="headway.pytorch.deepspeed"),
        pytest.raises(RuntimeError, match="Unable to JIT load"),
    ):
        _probe_builder().load()
    (record,) = [r for r in caplog.records if "headway_probe_op" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "several minutes" in record.getMessage()


def test_the_fused_adam_builder_goes_through_the_announced_path() -> None:
    from deepspeed.ops.op_builder import FusedAdamBuilder

    import headway.pytorch.deepspeed  # noqa: F401

    assert getattr(FusedAdamBuilder.jit_load, "_headway_announces", False)
