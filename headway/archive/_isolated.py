"""Checking a model definition in a child process with wall-time, CPU and memory limits.

The registry's request thread (and the worker, before unpacking) waits on the child, so a
crafted archive that slips past ``prescan_tar_gz`` still costs at most ``timeout`` seconds and
``memory_bytes`` of memory, and never the web server's other requests. The child reads the
archive on stdin and answers one JSON line. Never imports Django.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from headway.archive._rules import (
    MAX_MODEL_DEF_BYTES,
    EntrypointNotFound,
    ModelDefinitionError,
    ModelDefinitionTooLarge,
)

CHECK_TIMEOUT_SECONDS = 20.0
"""Default wall-time limit of one check, in seconds (a 32 MiB archive takes about one)."""

CHECK_MEMORY_BYTES = 1024 * 1024 * 1024
"""Default address-space limit of the checking process, in bytes."""

MAX_MESSAGE_CHARS = 2000
"""Longest refusal message passed on (the rest is cut, with a marker)."""

_ERRORS: dict[str, type[ModelDefinitionError]] = {
    "too_large": ModelDefinitionTooLarge,
    "entrypoint": EntrypointNotFound,
    "invalid": ModelDefinitionError,
}


def clip_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


def check_model_definition_isolated(
    data: bytes,
    *,
    max_bytes: int = MAX_MODEL_DEF_BYTES,
    entrypoint_class: tuple[str, str] | None = None,
    timeout: float = CHECK_TIMEOUT_SECONDS,
    memory_bytes: int = CHECK_MEMORY_BYTES,
) -> int:
    """``check_model_definition`` in a child process; return the unpacked size in bytes.

    Arguments:
        data, max_bytes, entrypoint_class: as for ``check_model_definition``.
        timeout (float): wall-time limit in seconds (the CPU limit is the same, rounded up).
        memory_bytes (int): the child's address-space limit (``RLIMIT_AS``), in bytes.

    Raises:
        ModelDefinitionTooLarge, EntrypointNotFound, ModelDefinitionError: as
            ``check_model_definition`` raises them (messages cut to ``MAX_MESSAGE_CHARS``), and
            ModelDefinitionError when the check runs out of time or memory.
    """
    args = json.dumps(
        {
            "max_bytes": max_bytes,
            "entrypoint_class": entrypoint_class,
            "cpu_seconds": int(timeout) + 1,
            "memory_bytes": memory_bytes,
        }
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "headway.archive._isolated", args],
            input=data,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ModelDefinitionError(
            f"checking the model definition took longer than {timeout:g} s and was stopped;"
            " the archive's headers are unusually costly to read"
        ) from None
    try:
        answer: dict[str, Any] = json.loads(done.stdout.decode())
    except ValueError:
        raise ModelDefinitionError(
            "checking the model definition ran out of time or memory"
            f" (limits {timeout:g} s, {memory_bytes // (1024 * 1024)} MiB) and was stopped"
        ) from None
    if "error" in answer:
        raise _ERRORS.get(answer["error"], ModelDefinitionError)(clip_message(answer["message"]))
    return int(answer["unpacked"])


def _child(args: dict[str, Any]) -> dict[str, Any]:
    import resource

    from headway.archive._check import check_model_definition

    resource.setrlimit(resource.RLIMIT_AS, (args["memory_bytes"], args["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_CPU, (args["cpu_seconds"], args["cpu_seconds"]))
    data = sys.stdin.buffer.read()
    entrypoint = args["entrypoint_class"]
    try:
        unpacked = check_model_definition(
            data,
            max_bytes=args["max_bytes"],
            entrypoint_class=tuple(entrypoint) if entrypoint else None,
        )
    except ModelDefinitionTooLarge as exc:
        return {"error": "too_large", "message": clip_message(str(exc))}
    except EntrypointNotFound as exc:
        return {"error": "entrypoint", "message": clip_message(str(exc))}
    except ModelDefinitionError as exc:
        return {"error": "invalid", "message": clip_message(str(exc))}
    return {"unpacked": unpacked}


if __name__ == "__main__":
    print(json.dumps(_child(json.loads(sys.argv[1]))))
